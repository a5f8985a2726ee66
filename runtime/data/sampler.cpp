#include "data/sampler.hpp"

#include <numeric>

#include "common/rng.hpp"

namespace dynapar::data {

global_sampler::global_sampler(int n, int batch, std::uint64_t seed) : n_(n), batch_(batch), seed_(seed) {}

const std::vector<int>& global_sampler::permutation(std::int64_t epoch) {
  if (epoch != cached_epoch_) {
    perm_.resize(n_);
    std::iota(perm_.begin(), perm_.end(), 0);
    rng r(seed_ ^ (static_cast<std::uint64_t>(epoch) * 0x9e3779b97f4a7c15ULL));
    for (int i = n_ - 1; i > 0; --i) std::swap(perm_[i], perm_[r.below(static_cast<std::uint64_t>(i) + 1)]);
    cached_epoch_ = epoch;
  }
  return perm_;
}

std::vector<int> global_sampler::step_samples(std::int64_t step) {
  const std::int64_t epoch = step / steps_per_epoch();
  const int t = static_cast<int>(step % steps_per_epoch());
  const auto& p = permutation(epoch);
  return std::vector<int>(p.begin() + static_cast<std::ptrdiff_t>(t) * batch_, p.begin() + static_cast<std::ptrdiff_t>(t + 1) * batch_);
}

}  // namespace dynapar::data
