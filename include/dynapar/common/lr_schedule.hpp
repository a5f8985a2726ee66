// The learning rate of a step, the same on every device and in the one-device reference
// (docs/FORMATS.md, optimizer.schedule). Pure; header-only. The formulas are PyTorch's:
// StepLR; and LinearLR warm-up (start factor 1 / (warmup + 1)) followed by
// CosineAnnealingLR (T_max = steps - warmup, eta_min = min_lr), as in SequentialLR; past
// `steps`, min_lr. tests/cli/lr_schedule.sh checks them against torch.optim.lr_scheduler.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace dynapar {

struct lr_schedule {
  std::string kind = "constant";  // constant, step or cosine
  std::int64_t warmup_steps = 0;  // cosine: linear warm-up from lr / (warmup + 1) to lr
  std::int64_t steps = 0;         // cosine: where it reaches min_lr (0: the run's length, set by the job)
  std::int64_t step_size = 1;     // step: lr x gamma every step_size steps
  double gamma = 0.1;
  double min_lr = 0;              // cosine: the floor
};

// Whether `s` is a schedule lr_at can follow for base rate `lr` (the job file and a node's
// Welcome both check it here); the error names the field. A cosine schedule's steps 0 (the
// run's length, not known yet) passes.
inline status check_schedule(const lr_schedule& s, double lr) {
  if (s.kind != "constant" && s.kind != "step" && s.kind != "cosine")
    return make_error("bad_schedule", "schedule kind '" + s.kind + "' is not constant, step or cosine");
  if (s.step_size < 1) return make_error("bad_schedule", "schedule step_size must be >= 1");
  if (!(s.gamma > 0 && s.gamma <= 1)) return make_error("bad_schedule", "schedule gamma must be in (0, 1]");
  if (s.warmup_steps < 0 || s.steps < 0) return make_error("bad_schedule", "schedule warmup_steps and steps must be >= 0");
  if (s.steps > 0 && s.warmup_steps >= s.steps) return make_error("bad_schedule", "schedule warmup_steps must be below steps");
  if (!(s.min_lr >= 0 && s.min_lr <= lr)) return make_error("bad_schedule", "schedule min_lr must be in [0, lr]");
  return ok_status();
}

// The learning rate at (0-based) training step `step`, for base rate `lr`.
inline double lr_at(const lr_schedule& s, double lr, std::int64_t step) {
  if (step < 0) step = 0;
  if (s.kind == "step") return lr * std::pow(s.gamma, static_cast<double>(step / std::max<std::int64_t>(1, s.step_size)));
  if (s.kind != "cosine") return lr;
  if (step < s.warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps + 1);
  const std::int64_t span = s.steps - s.warmup_steps;
  if (span <= 0 || step >= s.steps) return s.min_lr;
  const double pi = std::acos(-1.0);
  const double done = static_cast<double>(step - s.warmup_steps) / static_cast<double>(span);
  return s.min_lr + (lr - s.min_lr) * 0.5 * (1 + std::cos(pi * done));
}

}  // namespace dynapar
