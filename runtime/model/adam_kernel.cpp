// Built with -O3 -fno-math-errno -ffp-contract=off (CMakeLists.txt): vectorised square roots
// and divisions, and no contraction into fused multiply-adds, which would round differently
// in the vector body and the scalar tail, and between the AVX2 and baseline clones.
#include "model/adam_kernel.hpp"

#include <cmath>

namespace dynapar::model {

adam_coefficients adam_step_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay, std::int64_t step,
                                         double grad_divisor) {
  const double s = static_cast<double>(step);
  adam_coefficients c;
  c.beta1 = static_cast<float>(beta1);
  c.one_minus_beta1 = static_cast<float>(1 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.one_minus_beta2 = static_cast<float>(1 - beta2);
  c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(1 - std::pow(beta2, s)));
  c.eps = static_cast<float>(eps);
  c.neg_step_size = static_cast<float>(-(lr / (1 - std::pow(beta1, s))));
  c.weight_decay = static_cast<float>(weight_decay);
  c.grad_divisor = static_cast<float>(grad_divisor);
  return c;
}

namespace {

// The loop the compiler vectorises; `decay` is a template argument so that the common case
// (no weight decay) carries no per-element branch. Inlined into each clone of adam_update,
// so that each is vectorised for its own instruction set.
template <bool decay>
__attribute__((always_inline)) inline void update(float* __restrict p, float* __restrict m, float* __restrict v, const float* __restrict g, std::int64_t n,
            const adam_coefficients& c) {
  const float b1 = c.beta1, c1 = c.one_minus_beta1, b2 = c.beta2, c2 = c.one_minus_beta2;
  const float sb2 = c.sqrt_bias_correction2, eps = c.eps, step = c.neg_step_size, wd = c.weight_decay, div = c.grad_divisor;
  for (std::int64_t i = 0; i < n; ++i) {
    float gi = g[i] / div;
    if constexpr (decay) gi = gi + wd * p[i];
    const float mi = m[i] * b1 + c1 * gi;
    const float vi = v[i] * b2 + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] + step * mi / (std::sqrt(vi) / sb2 + eps);
  }
}

}  // namespace

__attribute__((target_clones("avx2", "default"))) void adam_update(float* p, float* m, float* v, const float* g, std::int64_t n,
                                                                    const adam_coefficients& c) {
  if (c.weight_decay != 0)
    update<true>(p, m, v, g, n, c);
  else
    update<false>(p, m, v, g, n, c);
}

}  // namespace dynapar::model
