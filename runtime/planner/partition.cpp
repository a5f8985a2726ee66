#include "planner/partition.hpp"

#include <algorithm>
#include <cmath>

namespace dynapar::planner {
namespace {
constexpr double inf = unlimited;

int inflight(const problem& p, int n, int j) {
  return (p.cfg.schedule == schedule_kind::gpipe || n == 1) ? 1 : n - j;
}
}  // namespace

std::optional<std::vector<int>> partition_layers(const problem& p, const std::vector<int>& devs, int u) {
  const int n = static_cast<int>(devs.size()), L = p.num_layers();
  if (n == 0 || n > L) return std::nullopt;
  if (n == 1) {
    if (!stage_fits(p, devs[0], 0, L, u, 1)) return std::nullopt;
    return std::vector<int>{0, L};
  }
  // Pass 1: best[j][i] = least bottleneck with stages 0..j-1 covering layers [0, i).
  const int W = L + 1;
  std::vector<double> best((n + 1) * W, inf);
  auto at = [W](std::vector<double>& v, int j, int i) -> double& { return v[j * W + i]; };
  at(best, 0, 0) = 0;
  for (int j = 1; j <= n; ++j) {
    const int d = devs[j - 1];
    const int fl = inflight(p, n, j - 1);
    const int i_max = L - (n - j);
    for (int i = j; i <= i_max; ++i) {
      double b = inf;
      for (int k = j - 1; k < i; ++k) {
        const double prev = at(best, j - 1, k);
        if (prev >= b) continue;
        if (!stage_fits(p, d, k, i, u, fl)) continue;
        double v = std::max(prev, stage_time(p, d, k, i, u));
        if (j >= 2) v = std::max(v, link_time(p, devs[j - 2], d, k, u));
        b = std::min(b, v);
      }
      at(best, j, i) = b;
    }
  }
  const double r_star = at(best, n, L);
  if (r_star == inf) return std::nullopt;
  // Pass 2: among splits whose every stage and link stays within R*, least total fill.
  const double limit = r_star * (1 + 1e-12) + 1e-300;
  std::vector<double> sum((n + 1) * W, inf);
  std::vector<int> from((n + 1) * W, -1);
  at(sum, 0, 0) = 0;
  for (int j = 1; j <= n; ++j) {
    const int d = devs[j - 1];
    const int fl = inflight(p, n, j - 1);
    for (int i = j; i <= L - (n - j); ++i) {
      for (int k = j - 1; k < i; ++k) {
        const double prev = at(sum, j - 1, k);
        if (prev == inf || !stage_fits(p, d, k, i, u, fl)) continue;
        const double st = stage_time(p, d, k, i, u);
        if (st > limit) continue;
        double v = prev + st;
        if (j >= 2) {
          const double lt = link_time(p, devs[j - 2], d, k, u);
          if (lt > limit) continue;
          v += lt;
        }
        if (v < at(sum, j, i)) { at(sum, j, i) = v; from[j * W + i] = k; }
      }
    }
  }
  std::vector<int> splits(n + 1);
  splits[n] = L;
  for (int j = n, i = L; j > 0; --j) {
    i = from[j * W + i];
    splits[j - 1] = i;
  }
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
    if (!g.feasible || g.cap < std::min(share, static_cast<double>(p.cfg.batch)) * 0.5) {
      if (!g.feasible) continue;
    }
    const double t = group_time(p, g, std::min(share, g.cap));
    // Per sample, so that a memory cap below the estimate is not mistaken for speed.
    const double per_sample = t / std::min(share, g.cap);
    if (per_sample < best_t) { best_t = per_sample; best = std::move(g); }
  }
  return best;
}

}  // namespace dynapar::planner
