// Model profiles derived from real architectures by counting FLOPs, activations and
// parameters per layer (docs/PROFILES.md shows the arithmetic). Pure.
#pragma once

#include <string>
#include <vector>

#include "planner/profile.hpp"

namespace dynapar::planner {

struct profile_options {
  double reference_flops_per_s = 15e12;  // sustained rate of the reference device (speed 1)
  double backward_factor = 2.0;          // backward FLOPs per forward FLOP
  double overhead_per_layer_s = 30e-6;   // launches per micro-batch, fwd + bwd
  double bytes_per_value = 4;            // float32
  double optimizer_state_factor = 1;     // SGD with momentum
};

const std::vector<std::string>& builtin_profile_names();
result<model_profile> builtin_profile(const std::string& name, const profile_options& opt = {});

}  // namespace dynapar::planner
