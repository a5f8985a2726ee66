#include "schedule/runner.hpp"

namespace dynapar::schedule {

const instruction* stage_runner::next() const {
  if (finished()) return nullptr;
  const instruction& in = prog_[pc_];
  if (in.kind == op::recv_act && !acts_.count(in.micro)) return nullptr;
  if (in.kind == op::recv_grad && !grads_.count(in.micro)) return nullptr;
  return &in;
}

}  // namespace dynapar::schedule
