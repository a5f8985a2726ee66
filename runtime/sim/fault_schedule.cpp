#include "sim/fault_schedule.hpp"

#include <algorithm>
#include <utility>

namespace dynapar::sim {

fault_schedule::fault_schedule(std::vector<fault> plan, std::int64_t start, std::uint64_t seed)
    : plan_(std::move(plan)), start_(start), rng_(seed) {
  while (next_ < plan_.size() && plan_[next_].step < start) ++next_;  // applied by the run resumed from
  // A kill at the first placement waits for it, which comes before the first step's faults.
  for (const auto& f : plan_)
    if (f.step == start && f.moment == fault_moment::placement) armed_.push_back(f);
}

fault_schedule::due_faults fault_schedule::due(std::int64_t t, const std::vector<fault>& extra) {
  due_faults d;
  const auto sort = [&](const fault& f, std::vector<fault>& now) {
    if (f.moment == fault_moment::step) return now.push_back(f);
    armed_.push_back(f);
    d.armed.push_back(f);
  };
  for (; next_ < plan_.size() && plan_[next_].step <= t; ++next_)
    if (const auto& f = plan_[next_]; f.step == t && !(f.moment == fault_moment::placement && t == start_)) sort(f, d.now);
  for (const auto& f : extra) sort(f, d.injected);
  return d;
}

std::vector<fault> fault_schedule::take(fault_moment m, std::size_t most) {
  std::vector<fault> out;
  for (auto it = armed_.begin(); it != armed_.end() && out.size() < most;) {
    if (it->moment != m) {
      ++it;
      continue;
    }
    out.push_back(*it);
    it = armed_.erase(it);
  }
  return out;
}

bool fault_schedule::waiting(fault_moment m) const {
  return std::any_of(armed_.begin(), armed_.end(), [m](const fault& f) { return f.moment == m; });
}

bool fault_schedule::pending(std::int64_t next) const {
  return (next_ < plan_.size() && plan_[next_].step <= next) ||
         std::any_of(armed_.begin(), armed_.end(), [](const fault& f) { return f.moment != fault_moment::early; });
}

int fault_schedule::after_us(double window_s) {
  return window_s > 0 ? static_cast<int>(std::uniform_real_distribution<double>(0, window_s)(rng_) * 1e6) : 0;
}

std::size_t fault_schedule::pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

}  // namespace dynapar::sim
