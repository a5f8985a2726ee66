// Dry run of a pipeline: the schedule validator.
#include <algorithm>
#include <map>
#include <set>

#include "schedule/schedule.hpp"

namespace dynapar::schedule {

result<dry_run> validate(const pipeline& p, double tf, double tb) {
  const int n = p.stages, m = p.micro_batches;
  if (static_cast<int>(p.programs.size()) != n) return make_error("bad_schedule", "one program per stage expected");
  // Static checks: each stage forwards and backwards every micro-batch exactly once, forward first.
  for (int j = 0; j < n; ++j) {
    std::map<int, int> fwd, bwd;
    for (const auto& in : p.programs[j]) {
      if (in.micro < 0 || in.micro >= m)
        return make_error("bad_schedule", "stage " + std::to_string(j) + ": micro-batch " + std::to_string(in.micro) + " out of range");
      if (in.kind == op::forward) ++fwd[in.micro];
      if (in.kind == op::backward) {
        if (!fwd.count(in.micro)) return make_error("bad_schedule", "stage " + std::to_string(j) + ": backward of " +
                                                                         std::to_string(in.micro) + " before its forward");
        ++bwd[in.micro];
      }
    }
    for (int k = 0; k < m; ++k)
      if (fwd[k] != 1 || bwd[k] != 1)
        return make_error("bad_schedule", "stage " + std::to_string(j) + ": micro-batch " + std::to_string(k) +
                                              " is not forwarded and backwarded exactly once");
  }
  // Dynamic: sends deliver at once; a stage blocks on a receive until its message exists.
  std::vector<std::size_t> pc(n, 0);
  std::vector<double> clock(n, 0);
  std::vector<int> held(n, 0);
  dry_run out;
  out.peak_activations.assign(n, 0);
  std::set<std::pair<int, int>> act, grad;          // (stage receiving, micro) available
  std::map<std::pair<int, int>, double> act_t, grad_t;
  for (;;) {
    bool progressed = false, done = true;
    for (int j = 0; j < n; ++j) {
      while (pc[j] < p.programs[j].size()) {
        const auto& in = p.programs[j][pc[j]];
        if (in.kind == op::recv_act) {
          if (j == 0) return make_error("bad_schedule", "stage 0 receives an activation");
          auto it = act_t.find({j, in.micro});
          if (it == act_t.end()) break;
          clock[j] = std::max(clock[j], it->second);
        } else if (in.kind == op::recv_grad) {
          if (j + 1 == n) return make_error("bad_schedule", "the last stage receives a gradient");
          auto it = grad_t.find({j, in.micro});
          if (it == grad_t.end()) break;
          clock[j] = std::max(clock[j], it->second);
        } else if (in.kind == op::send_act) {
          if (j + 1 == n) return make_error("bad_schedule", "the last stage sends an activation");
          act_t[{j + 1, in.micro}] = clock[j];
        } else if (in.kind == op::send_grad) {
          if (j == 0) return make_error("bad_schedule", "stage 0 sends a gradient");
          grad_t[{j - 1, in.micro}] = clock[j];
        } else if (in.kind == op::forward) {
          clock[j] += tf;
          out.peak_activations[j] = std::max(out.peak_activations[j], ++held[j]);
        } else if (in.kind == op::backward) {
          clock[j] += tb;
          --held[j];
        }
        ++pc[j];
        progressed = true;
      }
      if (pc[j] < p.programs[j].size()) done = false;
    }
    if (done) break;
    if (!progressed) {
      for (int j = 0; j < n; ++j)
        if (pc[j] < p.programs[j].size())
          return make_error("deadlock", "stage " + std::to_string(j) + " waits forever at '" +
                                            to_text({p.programs[j][pc[j]]}) + "' (instruction " + std::to_string(pc[j]) + ")");
    }
  }
  out.makespan = *std::max_element(clock.begin(), clock.end());
  return out;
}

}  // namespace dynapar::schedule
