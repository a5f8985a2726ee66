// --compare: the job's first steps again under other policies, on the same devices
// and dynamics (a fresh controller each), against this run's step times.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "training/records.hpp"
#include "training/settings.hpp"

namespace dynapar::training {

struct policy_run {
  std::string policy;
  std::int64_t steps = 0;
  double mean_step_time_s = 0;
  double this_run_mean_step_time_s = 0;  // this run's, over the same steps
  double speedup = 0;                    // the policy's mean over this run's
  double avg_cost = 0;                   // a step
};

// Trains with the given settings (actors::train in the CLI; a fake in tests).
using train_fn = std::function<result<train_outcome>(const train_settings&, const train_callbacks&)>;

// The first min(steps, s.steps) steps under each policy; `ours` is this run's time by step.
// Step 0 (start-up: spawning, probes, the first deployment) is left out of every mean: the
// first run in a process also pays the process's own warm-up (on a GPU, CUDA's and cuDNN's
// initialisation, 0.1-0.3 s), which the runs after it do not. Needs s.controller.
result<std::vector<policy_run>> compare_policies(const train_settings& s, const std::vector<std::string>& policies,
                                                 std::int64_t steps, const std::map<std::int64_t, double>& ours,
                                                 const train_fn& train);

}  // namespace dynapar::training
