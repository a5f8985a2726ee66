// xoshiro256** seeded by splitmix64; Box-Muller normals. Chosen because std::
// distributions differ between standard libraries and results must be reproducible.
#include "common/rng.hpp"

#include <cmath>

namespace dynapar {
namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

rng::rng(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

std::uint64_t rng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

std::uint64_t rng::below(std::uint64_t n) {
  // Rejection keeps the result unbiased for every n.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x;
  do x = next_u64(); while (x >= limit);
  return x % n;
}

double rng::normal(double mean, double stddev) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + stddev * spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * M_PI * u2);
  has_spare_ = true;
  return mean + stddev * r * std::cos(2.0 * M_PI * u2);
}

rng rng::fork(std::uint64_t stream) const {
  std::uint64_t x = s_[0] ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
  return rng(splitmix64(x));
}

}  // namespace dynapar
