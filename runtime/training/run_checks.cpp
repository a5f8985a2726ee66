#include "training/run_checks.hpp"

#include <string>

namespace dynapar::training {

status check_run(const train_settings& s, int samples, int layers) {
  if (samples < s.batch) return make_error("bad_job", "the data set has fewer samples than one batch");
  if (s.slot_steps < 1) return make_error("bad_job", "slot_steps must be >= 1");
  for (const auto& [step, p] : s.replans)
    if (auto v = planner::validate(p, layers, s.batch); !v)
      return make_error(v.err().code, "re-plan before step " + std::to_string(step) + ": " + v.err().message);
  if (s.controller && s.controller->replan_every < 1) return make_error("bad_job", "replan_every must be >= 1");
  if (s.profile_timed && !s.profile) return make_error("bad_job", "profile-timed emulation needs the model's profile");
  if (!s.resume) return ok_status();
  if (static_cast<int>(s.resume->num_layers()) != layers)
    return make_error("bad_checkpoint", "the checkpoint has " + std::to_string(s.resume->num_layers()) + " layers, the model " + std::to_string(layers));
  if (s.resume->step < 0 || s.resume->step > s.steps)
    return make_error("bad_checkpoint", "the checkpoint is at step " + std::to_string(s.resume->step) + ", the job has " + std::to_string(s.steps) +
                                            " steps");
  return ok_status();
}

}  // namespace dynapar::training
