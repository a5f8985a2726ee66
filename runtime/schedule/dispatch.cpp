#include "schedule/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace dynapar::schedule {

prospect prospect_of(const probe_progress& p, double now, double work_over_fwd, double trust) {
  const double n = std::max(1, p.samples), first = std::max(1, p.first_samples);
  const bool prior = p.prior_s > 0;
  auto weigh = [&](double measured) {
    return prior ? std::exp(trust * std::log(measured) + (1 - trust) * std::log(p.prior_s)) : measured;
  };
  if (p.done_s >= 0) return {p.done_s, weigh(std::max(p.compute_s, 1e-12) / n)};
  double per = 0;
  if (p.forward_s >= 0) {
    per = weigh(std::max(p.forward_s, 1e-12) * work_over_fwd / first);
  } else {  // its first forward takes longer than it has run, so each sample at least this
    per = std::max(now - p.started_s, 1e-12) * work_over_fwd / first;
    if (prior) per = std::max(per, p.prior_s);
  }
  return {std::max(now, p.started_s + per * n), per};
}

void pace_noise::observe(int device, double probe_s, double rest_s) {
  if (!(probe_s > 0 && rest_s > 0)) return;
  constexpr double a = 0.1;  // about the last ten steps
  auto add = [&](double& var, double err) { var = var < 0 ? err * err : (1 - a) * var + a * err * err; };
  add(probe_var_, std::log(probe_s / rest_s));
  if (const double p = prior(device); p > 0) add(prior_var_, std::log(p / rest_s));
  prior_[device] = rest_s;
}

double pace_noise::prior(int device) const {
  const auto it = prior_.find(device);
  return it == prior_.end() ? -1 : it->second;
}

double pace_noise::trust() const {
  if (probe_var_ < 0 || prior_var_ < 0 || probe_var_ + prior_var_ <= 0) return 1;
  return prior_var_ / (probe_var_ + prior_var_);
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
