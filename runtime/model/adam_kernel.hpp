// One pass of Adam over a float32 parameter: the moments and the parameter updated together,
// with no temporaries. No torch here, so that this file's build flags (vectorised, no fused
// multiply-add) do not touch the library's precompiled LibTorch header.
#pragma once

#include <cstdint>

namespace dynapar::model {

// The scalars of one Adam step, rounded to float as LibTorch rounds a double scalar applied
// to a float tensor.
struct adam_coefficients {
  float beta1 = 0.9F, one_minus_beta1 = 0.1F;
  float beta2 = 0.999F, one_minus_beta2 = 0.001F;
  float sqrt_bias_correction2 = 1;  // sqrt(1 - beta2^step)
  float eps = 1e-8F;
  float neg_step_size = -1e-3F;  // -lr / (1 - beta1^step)
  float weight_decay = 0;        // L2 (added to the gradient), as torch::optim::Adam
  float grad_divisor = 1;        // the gradient is g / grad_divisor (a summed gradient's mean)
};

adam_coefficients adam_step_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay, std::int64_t step,
                                         double grad_divisor = 1);

// For i in [0, n): g' = g / grad_divisor + weight_decay p; m = beta1 m + (1 - beta1) g';
// v = beta2 v + (1 - beta2) g' g'; p = p - step_size m / (sqrt(v) / sqrt_bias_correction2 + eps).
// Each element's result depends only on its own inputs: the same bits whether a tensor is
// updated whole or in pieces, on any x86-64 (no fused multiply-add, tested in model_tests).
void adam_update(float* p, float* m, float* v, const float* g, std::int64_t n, const adam_coefficients& c);

}  // namespace dynapar::model
