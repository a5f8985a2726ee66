// Whether a proposed plan is worth moving to (issue 17, docs/MODEL.md "Hysteresis"). A plan
// that moves or drops layers must gain per step, over the steps it is expected to last, more
// than its migration plus the noise of the predictions themselves: near-equal plans otherwise
// flap back and forth on estimate noise, moving megabytes of layers each time. New shares
// alone move nothing and need only the re-plan margin. Pure.
#pragma once

#include <optional>
#include <string>

#include "planner/evaluate.hpp"

namespace dynapar::planner {

struct switch_check {
  bool keep = false;         // stay on the current plan
  double gain = 0;           // relative score gain per step, migration aside
  double threshold = 0;      // the margin applied: replan_margin, or noise + migration / (lifetime x step time)
  std::optional<plan> instead;  // take this plan (the current layout re-shared), not the proposed one
  std::string why;           // for the log when kept or replaced
};

// The current plan's layout with shares re-solved to finish together: every group with its
// devices, splits and micro-batch, and at least one share quantum. Moves no layer. Empty if a
// device is gone or it does not fit. The search's warm candidate too (search.hpp).
std::optional<plan> layout_keeping(const problem& p, const plan& current);

// `lifetime_steps`: steps the new plan is expected to last; `noise`: relative spread of the
// step-time predictions (measured). A proposed plan that moves layers must clear the threshold
// over layout_keeping() too when that beats the current plan by the re-plan margin; if it does
// not, that plan is taken `instead`. A current plan that no longer fits the problem (devices
// gone, memory) never holds.
switch_check check_switch(const problem& p, const plan& current, const plan& proposed, const queue_state& q,
                          double lifetime_steps, double noise);

}  // namespace dynapar::planner
