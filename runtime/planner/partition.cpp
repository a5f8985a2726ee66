#include "planner/partition.hpp"

#include <algorithm>
#include <cmath>

namespace dynapar::planner {
namespace {
constexpr double inf = unlimited;

int inflight(const problem& p, int n, int j) {
  return (p.cfg.schedule == schedule_kind::gpipe || n == 1) ? 1 : warm_up(p.cfg.schedule, n, j) + 1;
}
}  // namespace

std::optional<std::vector<int>> partition_layers(const problem& p, const std::vector<int>& devs, int u, bool least_fill) {
  const int n = static_cast<int>(devs.size()), L = p.num_layers();
  if (n == 0 || n > L) return std::nullopt;
  if (n == 1) {
    if (!stage_fits(p, devs[0], 0, L, u, 1)) return std::nullopt;
    return std::vector<int>{0, L};
  }
  // Hoisted per stage: memory room, activation factor, speed; per boundary: bandwidth, latency.
  const auto& sums = p.sums;
  const double state = 1.0 + p.model.optimizer_state_factor;
  std::vector<double> room(n), act_factor(n), inv_speed(n), inv_bw(n, 0), lat2(n, 0);
  for (int j = 0; j < n; ++j) {
    room[j] = p.memory(devs[j]);
    act_factor[j] = static_cast<double>(inflight(p, n, j)) * u;
    inv_speed[j] = 1.0 / p.speed(devs[j]);
    if (j >= 1) {
      inv_bw[j] = 1.0 / p.links.bw(devs[j - 1], devs[j]);
      lat2[j] = 2.0 * p.links.lat(devs[j - 1], devs[j]);
    }
  }
  auto fits = [&](int j, int lo, int hi) { return state * sums.params(lo, hi) + act_factor[j] * sums.act_mem(lo, hi) <= room[j]; };
  auto stage = [&](int j, int lo, int hi) { return (u * sums.work(lo, hi) + sums.fixed(lo, hi)) * inv_speed[j]; };
  const int W = L + 1;
  // Hoisted per stage j (0-based) over layers: lowest[j * W + i], the first layer stage j may
  // start at to end at i within its memory (widening a stage only adds memory, and a later
  // end only raises that first layer: two pointers); link_in[j * W + k], the boundary into
  // stage j at cut k. Same arithmetic as evaluated in place, so the splits are the same.
  std::vector<int> lowest(n * W, 0);
  std::vector<double> link_in(n * W, 0);
  for (int j = 0; j < n; ++j) {
    for (int i = 1, k = 0; i <= L; ++i) {
      while (k < i && !fits(j, k, i)) ++k;
      lowest[j * W + i] = k;  // == i: not even layer i-1 alone fits
    }
    if (j >= 1)
      for (int k = 0; k <= L; ++k) link_in[j * W + k] = 2.0 * u * sums.boundary_bytes(k) * inv_bw[j] + lat2[j];
  }
  // Pass 1: best[j][i] = least bottleneck with stages 0..j-1 covering layers [0, i). The
  // first stage can only start at layer 0 and the last only end at L: those two rows need
  // no scan (a scan would skip every other start, or fill cells nobody reads).
  std::vector<double> best((n + 1) * W, inf);
  std::vector<int> from((n + 1) * W, -1);
  best[0] = 0;
  for (int i = 1; i <= L - (n - 1); ++i) {
    if (lowest[i] != 0) continue;  // layers [0, i) do not fit the first device
    const double st = stage(0, 0, i);
    if (st < inf) { best[W + i] = st; from[W + i] = 0; }
  }
  for (int j = 2; j <= n; ++j) {
    const double* prev_row = &best[(j - 1) * W];
    const double* link = &link_in[(j - 1) * W];
    for (int i = j == n ? L : j; i <= L - (n - j); ++i) {
      double b = inf;
      // Widening the stage (k going down) only adds time and memory: stop once either is lost.
      const int k_end = std::max(j - 1, lowest[(j - 1) * W + i]);
      for (int k = i - 1; k >= k_end; --k) {
        const double st = stage(j - 1, k, i);
        if (st >= b) break;
        const double prev = prev_row[k];
        if (prev >= b) continue;
        const double v = std::max(std::max(prev, st), link[k]);
        if (v < b) { b = v; from[j * W + i] = k; }
      }
      best[j * W + i] = b;
    }
  }
  const double r_star = best[n * W + L];
  if (r_star == inf) return std::nullopt;
  std::vector<int> splits(n + 1);
  splits[n] = L;
  auto trace = [&] {
    for (int j = n, i = L; j > 0; --j) {
      i = from[j * W + i];
      splits[j - 1] = i;
    }
  };
  if (!least_fill) {  // any split reaching R*
    trace();
    return splits;
  }
  // Pass 2: among splits whose every stage and link stays within R*, least total fill.
  const double limit = r_star * (1 + 1e-12) + 1e-300;
  std::vector<double> sum((n + 1) * W, inf);
  std::fill(from.begin(), from.end(), -1);
  sum[0] = 0;
  for (int i = 1; i <= L - (n - 1); ++i)  // the first stage alone: its time from pass 1, if within R*
    if (best[W + i] <= limit) { sum[W + i] = best[W + i]; from[W + i] = 0; }
  for (int j = 2; j <= n; ++j) {
    const double* link = &link_in[(j - 1) * W];
    for (int i = j == n ? L : j; i <= L - (n - j); ++i) {
      double& cell = sum[j * W + i];
      const int k_end = std::max(j - 1, lowest[(j - 1) * W + i]);
      for (int k = i - 1; k >= k_end; --k) {
        const double st = stage(j - 1, k, i);
        if (st > limit) break;
        const double prev = sum[(j - 1) * W + k];
        if (prev == inf) continue;
        const double lt = link[k];
        if (lt > limit) continue;
        const double v = prev + st + lt;
        if (v < cell) { cell = v; from[j * W + i] = k; }
      }
    }
  }
  trace();
  return splits;
}

std::optional<group_shape> best_shape(const problem& p, const std::vector<int>& devs, double share_estimate) {
  const int n = static_cast<int>(devs.size()), L = p.num_layers();
  std::vector<int> candidates;
  if (p.cfg.micro_batch > 0) {
    candidates = {p.cfg.micro_batch};
  } else if (n == 1) {
    // No pipeline to fill: the largest micro-batch memory allows wastes no per-micro-batch overhead.
    const double stat = (1.0 + p.model.optimizer_state_factor) * p.sums.params(0, L);
    const double act = p.sums.act_mem(0, L);
    double u = act > 0 ? std::floor((p.memory(devs[0]) - stat) / act) : p.cfg.batch;
    u = std::min<double>(u, p.cfg.batch);
    if (u < 1) return std::nullopt;
    candidates = {static_cast<int>(u)};
  } else {
    for (int u : p.cfg.micro_batch_candidates)
      if (u <= p.cfg.batch) candidates.push_back(u);
    if (candidates.empty()) candidates.push_back(p.cfg.micro_batch_candidates.front());
  }
  std::optional<group_shape> best;
  double best_t = inf;
  const double share = std::max(1.0, share_estimate);
  for (int u : candidates) {
    auto splits = partition_layers(p, devs, u);
    if (!splits) continue;
    group_shape g = make_shape(p, devs, std::move(*splits), u);
    if (!g.feasible) continue;
    const double t = group_time(p, g, std::min(share, g.cap));
    // Per sample, so that a memory cap below the estimate is not mistaken for speed.
    const double per_sample = t / std::min(share, g.cap);
    if (per_sample < best_t) { best_t = per_sample; best = std::move(g); }
  }
  return best;
}

}  // namespace dynapar::planner
