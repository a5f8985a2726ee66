#include "control/recovery.hpp"

namespace dynapar::control {

recovery_decision decide_recovery(const recovery_facts& f) {
  using action = recovery_decision::action;
  recovery_decision d;
  d.wiped = f.wiped;
  // Late, but every device answers (a slow step, or a pause shorter than the probes): the
  // attempt is settled as a crash's would be, without a re-plan. Any other failure with
  // nobody lost is not a fault recovery can mend.
  if (f.lost.empty() && !f.late) return d;
  if (!f.lost.empty() && !f.controller) {
    std::string ids;
    for (int id : f.lost) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    d.code = "device_lost";
    d.why = "device " + ids + " lost; going on without it needs a controller (replan_every)";
    return d;
  }
  d.step_applied = f.committed;
  const std::int64_t done = f.committed ? f.step + 1 : f.step;
  if (f.lost.empty()) {
    if (f.late_retries + 1 > f.max_late_retries) {
      d.code = "too_slow";
      d.why = "step " + std::to_string(f.step) + " missed its deadline " + std::to_string(f.late_retries + 1) +
              " times in a row, its deadline doubled each time, with every device answering";
      return d;
    }
    d.what = action::retry_late;
    d.next_step = done;
    return d;
  }
  // A layer survives if one of its holders was lost neither now nor by an earlier recovery
  // since the plan in force was applied.
  d.wiped.insert(f.lost.begin(), f.lost.end());
  bool rollback = false;
  for (const auto& [layer, ids] : f.holders) {
    bool kept = false;
    for (int id : ids) kept = kept || !d.wiped.count(id);
    rollback = rollback || !kept;
  }
  if (!rollback) {
    d.what = action::go_on;
    d.next_step = done;
    return d;
  }
  // Steps [cut, done) are undone with the model they trained; the next plan places the cut's
  // layers afresh, so no device counts as wiped any more.
  d.what = action::roll_back;
  for (std::int64_t u = f.cut_step; u < done; ++u) d.undone.push_back(u);
  d.next_step = f.cut_step;
  d.wiped.clear();
  return d;
}

}  // namespace dynapar::control
