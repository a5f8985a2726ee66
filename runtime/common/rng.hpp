// Seeded, portable randomness (same numbers on every platform and standard library).
// Pure code takes an rng& instead of reading random_device. Not thread-safe: one per user.
#pragma once

#include <cstdint>

namespace dynapar {

class rng {
 public:
  explicit rng(std::uint64_t seed);
  std::uint64_t next_u64();
  double uniform();                        // [0, 1)
  double uniform(double lo, double hi);    // [lo, hi)
  std::uint64_t below(std::uint64_t n);    // [0, n), n > 0
  double normal(double mean, double stddev);
  rng fork(std::uint64_t stream) const;    // an independent generator for a sub-stream

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace dynapar
