// The seeded global sampler (docs/RUNTIME.md, "Why a run equals one device"): step t of an epoch uses samples
// [tB, (t+1)B) of that epoch's permutation; group g takes a contiguous sub-range in plan
// order. An epoch has floor(n / B) steps (the remainder is dropped). Pure.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dynapar::data {

class global_sampler {
 public:
  global_sampler(int n, int batch, std::uint64_t seed);
  int steps_per_epoch() const { return n_ / batch_; }
  // Global step -> its samples (epoch = step / steps_per_epoch).
  std::vector<int> step_samples(std::int64_t step);

 private:
  const std::vector<int>& permutation(std::int64_t epoch);
  int n_, batch_;
  std::uint64_t seed_;
  std::int64_t cached_epoch_ = -1;
  std::vector<int> perm_;
};

}  // namespace dynapar::data
