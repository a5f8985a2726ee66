#include "schedule/schedule.hpp"

#include <algorithm>

namespace dynapar::schedule {
namespace {

void add_forward(program& out, int j, int n, int m) {
  out.push_back({j == 0 ? op::load : op::recv_act, m});
  out.push_back({op::forward, m});
  if (j + 1 < n) out.push_back({op::send_act, m});
}

void add_backward(program& out, int j, int n, int m) {
  if (j + 1 < n) out.push_back({op::recv_grad, m});
  out.push_back({op::backward, m});
  if (j > 0) out.push_back({op::send_grad, m});
}

}  // namespace

pipeline generate(planner::schedule_kind kind, int n, int m) {
  pipeline p;
  p.kind = kind;
  p.stages = n;
  p.micro_batches = m;
  p.programs.resize(n);
  for (int j = 0; j < n; ++j) {
    program& out = p.programs[j];
    if (n == 1) {
      for (int k = 0; k < m; ++k) { add_forward(out, j, n, k); add_backward(out, j, n, k); }
    } else if (kind == planner::schedule_kind::gpipe) {
      for (int k = 0; k < m; ++k) add_forward(out, j, n, k);
      for (int k = m - 1; k >= 0; --k) add_backward(out, j, n, k);
    } else {
      const int warm = std::min(planner::warm_up(kind, n, j), m);
      int f = 0, b = 0;
      for (; f < warm; ++f) add_forward(out, j, n, f);
      while (f < m) {
        add_forward(out, j, n, f++);
        add_backward(out, j, n, b++);
      }
      while (b < m) add_backward(out, j, n, b++);
    }
  }
  return p;
}

pipeline forward_only(int n, int m) {
  pipeline p;
  p.stages = n;
  p.micro_batches = m;
  p.programs.resize(n);
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < m; ++k) add_forward(p.programs[j], j, n, k);
  return p;
}

}  // namespace dynapar::schedule
