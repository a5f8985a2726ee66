// One stage's work in a step attempt, as the driver's groups hand it to a device and as it
// crosses to a node (wire::ops::step): the one payload both embed, so that neither copies the
// other field by field. What each adds is its own: the actor message its neighbours' handles
// and tensors, the wire its neighbours' ids and tensor counts. Pure data.
#pragma once

#include <cstdint>
#include <vector>

namespace dynapar::step {

struct stage_work {
  std::int64_t tag = 0;         // the attempt's tag: answers of an abandoned attempt are told apart
  std::int64_t train_step = 0;  // the training step: seeds a layer's dropout with the micro-batch
  int lo = 0, hi = 0;           // layers [lo, hi)
  std::int64_t first_micro = 0;  // the step's index of the group's first micro-batch (the exact sum's tree)
  bool accumulate = false;       // exact: false (model::device_worker::begin_step)
  // First or last stage: each micro-batch's sample ids, from which a node holding the job's
  // data set builds the inputs and targets itself (only ids then cross the wire).
  std::vector<std::vector<int>> samples;
  // First stage, training: the samples this slice's place in the batch holds at the next step,
  // which a node building its inputs decodes while this step runs (data/read_ahead.hpp); a
  // re-plan that deals the next step otherwise only wastes that work.
  std::vector<int> ahead;
  // Within-step dispatch (step/layout.hpp), single-device groups: `more`, this is a probe: the
  // device reports its first forward and its end (interim reports) and keeps the step open
  // for its rest; `resume`, this is the rest of the open step (no new step: gradients and
  // loss go on).
  bool more = false, resume = false;
  // Evaluation (driver::evaluate): forward only, in evaluation mode, nothing kept and no
  // training state touched; inputs, targets and samples are of the validation set.
  bool evaluate = false;
};

}  // namespace dynapar::step
