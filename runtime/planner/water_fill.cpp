#include "planner/water_fill.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

namespace dynapar::planner {

result<fill_result> water_fill(const std::vector<affine_group>& groups, double batch) {
  const std::size_t n = groups.size();
  double cap_sum = 0;
  for (const auto& g : groups) cap_sum += g.cap;
  if (n == 0 || cap_sum < batch)
    return make_error("infeasible", "memory caps hold " + std::to_string(cap_sum) + " samples, fewer than the batch " +
                                        std::to_string(batch));
  // Total share at finish time T is piecewise linear and non-decreasing; walk its breakpoints.
  struct event { double t; std::size_t g; bool start; };
  std::vector<event> ev;
  ev.reserve(2 * n);
  for (std::size_t g = 0; g < n; ++g) {
    ev.push_back({groups[g].beta, g, true});
    const auto& gr = groups[g];
    ev.push_back({gr.alpha > 0 ? gr.beta + gr.alpha * gr.cap : gr.beta, g, false});
  }
  std::sort(ev.begin(), ev.end(), [](const event& a, const event& b) { return a.t < b.t || (a.t == b.t && !a.start && b.start); });
  // filled(T) = saturated + slope * T - offset over the groups between their start and cap.
  double slope = 0, offset = 0, saturated = 0, finish = ev.back().t;
  for (const auto& e : ev) {
    if (slope > 0 && saturated + slope * e.t - offset >= batch) {
      finish = (batch - saturated + offset) / slope;
      break;
    }
    const auto& g = groups[e.g];
    if (g.alpha <= 0) {  // infinitely fast group: takes its whole cap at once
      if (e.start) saturated += g.cap;
    } else if (e.start) {
      slope += 1.0 / g.alpha;
      offset += g.beta / g.alpha;
    } else {
      slope -= 1.0 / g.alpha;
      offset -= g.beta / g.alpha;
      saturated += g.cap;
    }
    if (saturated + slope * e.t - offset >= batch * (1 - 1e-12)) {
      finish = e.t;
      break;
    }
  }
  fill_result r;
  r.finish = finish;
  r.shares.resize(n);
  double sum = 0;
  for (std::size_t g = 0; g < n; ++g) {
    const auto& gr = groups[g];
    const double b = gr.alpha > 0 ? (finish - gr.beta) / gr.alpha : gr.cap;
    r.shares[g] = std::clamp(b, 0.0, gr.cap);
    sum += r.shares[g];
  }
  // Rounding in the sweep may leave a sliver; spread it over groups with room.
  if (sum > 0 && std::abs(sum - batch) > 1e-12 * batch) {
    const double scale = batch / sum;
    for (std::size_t g = 0; g < n; ++g) r.shares[g] = std::min(groups[g].cap, r.shares[g] * scale);
  }
  return r;
}

result<std::vector<int>> integer_shares(const std::vector<std::function<double(int)>>& time_in,
                                        const std::vector<int>& caps_in, int batch_in, int quantum) {
  if (quantum < 1 || batch_in % quantum != 0)
    return make_error("bad_config", "the batch " + std::to_string(batch_in) + " is not a multiple of the share quantum " +
                                        std::to_string(quantum));
  // Solve in units of `quantum` samples.
  std::vector<std::function<double(int)>> time;
  std::vector<int> caps;
  for (std::size_t g = 0; g < time_in.size(); ++g) {
    time.push_back([&f = time_in[g], quantum](int k) { return f(k * quantum); });
    caps.push_back(caps_in[g] / quantum);
  }
  const int batch = batch_in / quantum;
  const std::size_t n = time.size();
  long cap_sum = 0;
  for (int c : caps) cap_sum += std::max(0, c);
  if (n == 0 || cap_sum < batch)
    return make_error("infeasible", "memory caps hold " + std::to_string(cap_sum * quantum) +
                                        " samples, fewer than the batch " + std::to_string(batch_in));
  // Largest b <= cap with time(b) <= T (time is non-decreasing in b).
  auto most_within = [&](std::size_t g, double t) {
    int lo = 0, hi = std::min(caps[g], batch);
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (time[g](mid) <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
  };
  auto count = [&](double t) {
    long c = 0;
    for (std::size_t g = 0; g < n && c < batch; ++g) c += most_within(g, t);
    return c;
  };
  double lo = 0, hi = 0;
  for (std::size_t g = 0; g < n; ++g)
    if (caps[g] > 0) hi = std::max(hi, time[g](std::min(caps[g], batch)));
  // Bisection on the makespan. It need not be tight: taking every value <= hi and trimming the
  // largest until `batch` remain leaves the batch smallest values, whose maximum is the
  // optimum, for any hi >= it. A tighter hi only means fewer values to trim.
  for (int it = 0; it < 200 && hi - lo > 1e-6 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (count(mid) >= batch) hi = mid; else lo = mid;
  }
  std::vector<int> shares(n);
  long total = 0;
  for (std::size_t g = 0; g < n; ++g) total += shares[g] = most_within(g, hi);
  // Too many: take samples back from the groups that finish last.
  using item = std::pair<double, std::size_t>;
  std::priority_queue<item> slowest;
  for (std::size_t g = 0; g < n; ++g)
    if (shares[g] > 0) slowest.push({time[g](shares[g]), g});
  while (total > batch) {
    auto [t, g] = slowest.top();
    slowest.pop();
    --shares[g];
    --total;
    if (shares[g] > 0) slowest.push({time[g](shares[g]), g});
  }
  for (auto& x : shares) x *= quantum;
  return shares;
}

}  // namespace dynapar::planner
