#include "schedule/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace dynapar::schedule {

prospect prospect_of(const probe_progress& p, double now, double work_over_fwd) {
  const double n = std::max(1, p.samples);
  if (p.done_s >= 0) return {p.done_s, std::max(p.compute_s, 1e-12) / n};
  const double first = std::max(1, p.first_samples);
  // Not heard from: its first forward takes longer than `now`, so each sample at least this.
  const double per = (p.forward_s >= 0 ? p.forward_s : std::max(now, 1e-12)) * work_over_fwd / first;
  return {std::max(now, per * n), per};
}

std::vector<int> dispatch_units(const std::vector<prospect>& devices, int units, int unit) {
  std::vector<int> out(devices.size(), 0);
  if (devices.empty() || units <= 0) return out;
  using entry = std::pair<double, std::size_t>;  // finish with one more unit, device
  std::priority_queue<entry, std::vector<entry>, std::greater<entry>> next;
  auto finish = [&](std::size_t k) { return devices[k].free_s + (out[k] + 1) * unit * devices[k].per_sample_s; };
  for (std::size_t k = 0; k < devices.size(); ++k) next.push({finish(k), k});
  for (int u = 0; u < units; ++u) {
    const std::size_t k = next.top().second;
    next.pop();
    ++out[k];
    next.push({finish(k), k});
  }
  return out;
}

std::vector<int> dispatch_samples(const std::vector<prospect>& devices, int samples, int unit) {
  unit = std::max(1, unit);
  auto out = dispatch_units(devices, (samples + unit - 1) / unit, unit);
  for (int& n : out) {
    n = std::min(samples, n * unit);
    samples -= n;
  }
  return out;
}

int probe_samples(int share, double fraction, int unit) {
  unit = std::max(1, unit);
  const int units = share / unit;
  if (!(fraction > 0) || units < 2) return 0;
  const int k = std::clamp(static_cast<int>(std::floor(fraction * units)), 1, units - 1);
  return k * unit;
}

std::vector<int> probes(const std::vector<int>& shares, double fraction, int unit) {
  std::vector<int> out;
  int takers = 0;
  for (int share : shares) {
    out.push_back(probe_samples(share, fraction, unit));
    takers += out.back() > 0;
  }
  if (takers < 2) out.assign(shares.size(), 0);
  return out;
}

}  // namespace dynapar::schedule
