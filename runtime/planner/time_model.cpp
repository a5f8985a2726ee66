#include "planner/time_model.hpp"

#include <algorithm>
#include <cmath>

#include "planner/buckets.hpp"

namespace dynapar::planner {

double stage_time(const problem& p, int dev, int lo, int hi, double x) {
  return (x * p.sums.work(lo, hi) + p.sums.fixed(lo, hi)) / p.speed(dev);
}

double link_time(const problem& p, int a, int b, int cut, double x) {
  return 2.0 * (x * p.sums.boundary_bytes(cut) / p.links.bw(a, b) + p.links.lat(a, b));
}

bool stage_fits(const problem& p, int dev, int lo, int hi, int u, int inflight) {
  const double stat = (1.0 + p.model.optimizer_state_factor) * p.sums.params(lo, hi);
  return stat + static_cast<double>(inflight) * u * p.sums.act_mem(lo, hi) <= p.memory(dev);
}

group_shape make_shape(const problem& p, std::vector<int> devices, std::vector<int> splits, int u) {
  group_shape g;
  g.devices = std::move(devices);
  g.splits = std::move(splits);
  g.micro_batch = u;
  const int n = g.stages();
  g.stage_s.resize(n);
  g.link_s.resize(n > 0 ? n - 1 : 0);
  g.feasible = n > 0;
  const bool gpipe = p.cfg.schedule == schedule_kind::gpipe && n > 1;
  for (int j = 0; j < n; ++j) {
    const int lo = g.splits[j], hi = g.splits[j + 1], d = g.devices[j];
    g.stage_s[j] = stage_time(p, d, lo, hi, u);
    g.fill_s += g.stage_s[j];
    if (g.stage_s[j] > g.bottleneck_s || j == 0) { g.bottleneck_s = g.stage_s[j]; g.bottleneck = j; }
    if (!stage_fits(p, d, lo, hi, u, gpipe ? 1 : warm_up(p.cfg.schedule, n, j) + 1)) g.feasible = false;
    if (gpipe) {
      const double stat = (1.0 + p.model.optimizer_state_factor) * p.sums.params(lo, hi);
      const double per_mb = u * p.sums.act_mem(lo, hi);
      if (per_mb > 0) g.cap = std::min(g.cap, std::floor((p.memory(d) - stat) / per_mb) * u);
    }
  }
  for (int j = 0; j + 1 < n; ++j) {
    g.link_s[j] = link_time(p, g.devices[j], g.devices[j + 1], g.splits[j + 1], u);
    g.fill_s += g.link_s[j];
    if (g.link_s[j] > g.bottleneck_s) { g.bottleneck_s = g.link_s[j]; g.bottleneck = n + j; }
  }
  if (!gpipe && n > 1) {
    // 1F1B keeps w_j + 1 micro-batches in flight at stage j (w_j its warm-up forwards: n - j
    // - 1, or twice that for 1F1B-deep). Following one micro-batch from stage i down to stage
    // k and back closes a dependency loop that holds only w_i - w_k + 1 of them, so the cycle
    // is at least (stages i..k + links between) / (w_i - w_k + 1); with slow links this
    // exceeds every single stage (the DES shows it, tests/sim/des_test.cpp).
    std::vector<int> w(n);
    for (int j = 0; j < n; ++j) w[j] = warm_up(p.cfg.schedule, n, j);
    for (int i = 0; i < n; ++i) {
      double window = 0;
      for (int k = i; k < n; ++k) {
        window += g.stage_s[k] + (k > i ? g.link_s[k - 1] : 0.0);
        const double cycle = window / (w[i] - w[k] + 1);
        if (k > i && cycle > g.bottleneck_s * (1 + 1e-12)) { g.bottleneck_s = cycle; g.bottleneck = 2 * n + i; }
      }
    }
  }
  if (g.cap < 1) g.feasible = false;
  return g;
}

double group_time(const problem& p, const group_shape& g, double share) {
  if (share <= 0) return 0;
  const int u = g.micro_batch;
  if (share <= u) {  // a single, smaller micro-batch
    double t = 0;
    for (int j = 0; j < g.stages(); ++j) t += stage_time(p, g.devices[j], g.splits[j], g.splits[j + 1], share);
    for (int j = 0; j + 1 < g.stages(); ++j) t += link_time(p, g.devices[j], g.devices[j + 1], g.splits[j + 1], share);
    return t;
  }
  const double m = std::ceil(share / u);
  const double last = share - (m - 1) * u;
  if (last >= u) return (m - 1) * g.bottleneck_s + g.fill_s;
  // A smaller last micro-batch: the first fills the pipeline, m - 2 follow at the bottleneck's
  // pace, the last at its own (exact for one stage).
  double r_last = 0;
  for (int j = 0; j < g.stages(); ++j) r_last = std::max(r_last, stage_time(p, g.devices[j], g.splits[j], g.splits[j + 1], last));
  for (int j = 0; j + 1 < g.stages(); ++j)
    r_last = std::max(r_last, link_time(p, g.devices[j], g.devices[j + 1], g.splits[j + 1], last));
  return g.fill_s + (m - 2) * g.bottleneck_s + r_last;
}

double stage_busy(const problem& p, const group_shape& g, int j, double share) {
  if (share <= 0) return 0;
  const double m = std::ceil(share / g.micro_batch);
  const int lo = g.splits[j], hi = g.splits[j + 1];
  return (share * p.sums.work(lo, hi) + m * p.sums.fixed(lo, hi)) / p.speed(g.devices[j]);
}

// How long before stage j of g finishes the step's backward its layers from `lo` up are
// done: the last micro-batch's backward of the stage's layers below `lo`.
static double lead_below(const problem& p, const group_shape& g, int j, int lo, double share) {
  const int first = g.splits[j], u = g.micro_batch;
  if (lo <= first) return 0;
  const double last = share <= u ? share : share - (std::ceil(share / u) - 1) * u;  // group_time's cut
  return (last * (p.sums.work(first, lo) - p.sums.fwd(first, lo)) + 0.5 * p.sums.fixed(first, lo)) / p.speed(g.devices[j]);
}

std::vector<sum_segment> sum_segments(const problem& p, const std::vector<const group_shape*>& active,
                                      const std::vector<double>& shares) {
  std::vector<sum_segment> out;
  const std::size_t ng = active.size();
  if (ng < 2) return out;
  std::vector<int> cuts;
  for (const auto* g : active) cuts.insert(cuts.end(), g->splits.begin(), g->splits.end());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<int> stage(ng, 0);
  const double factor = 2.0 * static_cast<double>(ng - 1) / static_cast<double>(ng);
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
    sum_segment seg;
    for (std::size_t g = 0; g < ng; ++g) {
      while (active[g]->splits[stage[g] + 1] <= cuts[s]) ++stage[g];
      seg.holders.emplace_back(static_cast<int>(g), stage[g]);
      seg.devices.push_back(active[g]->devices[stage[g]]);
    }
    std::vector<int> ring = seg.devices;
    std::sort(ring.begin(), ring.end());
    double min_bw = unlimited, max_lat = 0;
    for (std::size_t i = 0; i < ng; ++i) {
      const int a = ring[i], b = ring[(i + 1) % ng];
      min_bw = std::min(min_bw, p.links.bw(a, b));
      max_lat = std::max(max_lat, p.links.lat(a, b));
    }
    const double latency = 2.0 * static_cast<double>(ng - 1) * max_lat;
    // Buckets from the segment's top layer down; without overlap one, the whole segment.
    // Each pays the ring's latency, so a bucket holds enough to take some multiple of it to move.
    const double least = p.cfg.overlap_sums ? std::max(p.cfg.sum_bucket_bytes, p.cfg.sum_bucket_latencies * latency * min_bw / factor)
                                            : unlimited;
    for (const auto span : bucket_spans(cuts[s], cuts[s + 1], least, [&](int a, int b) { return p.sums.params(a, b); })) {
      sum_segment b = seg;
      b.lo = span.lo;
      b.hi = span.hi;
      const double bytes = p.sums.params(b.lo, b.hi);
      if (bytes <= 0) continue;
      b.seconds = factor * bytes / min_bw + latency;
      for (std::size_t g = 0; g < ng; ++g)
        b.lead_s.push_back(shares.empty() ? 0.0 : lead_below(p, *active[g], stage[g], b.lo, shares[g]));
      out.push_back(std::move(b));
    }
  }
  return out;
}

double sums_end(const std::vector<sum_segment>& segs, const std::vector<std::vector<double>>& ready) {
  struct work {
    int device;
    double ready;
    int lo;
    double seconds;
  };
  std::vector<work> all;  // small: segments x groups
  for (const auto& s : segs) {
    double r = 0;
    if (!ready.empty())
      for (std::size_t h = 0; h < s.holders.size(); ++h) {
        const auto [g, j] = s.holders[h];
        r = std::max(r, ready[g][j] - (h < s.lead_s.size() ? s.lead_s[h] : 0.0));
      }
    for (int d : s.devices) all.push_back({d, r, s.lo, s.seconds});
  }
  std::sort(all.begin(), all.end(), [](const work& a, const work& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.ready != b.ready) return a.ready < b.ready;
    return a.lo > b.lo;
  });
  double end = 0, t = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i == 0 || all[i].device != all[i - 1].device) t = 0;
    t = std::max(t, all[i].ready) + all[i].seconds;
    end = std::max(end, t);
  }
  return end;
}

double sync_time(const problem& p, const std::vector<const group_shape*>& active) {
  return sums_end(sum_segments(p, active), {});
}

std::vector<double> stage_ready(const problem& p, const group_shape& g, double share, double time_s) {
  const int n = g.stages();
  std::vector<double> out(n, time_s);
  const double x = std::min(share, static_cast<double>(g.micro_batch));  // the last micro-batch, about
  double drain = 0;
  for (int j = 1; j < n; ++j) {
    const int lo = g.splits[j - 1], hi = g.splits[j];
    drain += (x * (p.sums.work(lo, hi) - p.sums.fwd(lo, hi)) + 0.5 * p.sums.fixed(lo, hi)) / p.speed(g.devices[j - 1]);
    drain += 0.5 * link_time(p, g.devices[j - 1], g.devices[j], hi, x);
    out[j] = std::max(0.0, time_s - drain);
  }
  return out;
}

double exposed_sync(const problem& p, const std::vector<sum_segment>& segs, const std::vector<std::vector<double>>& ready,
                    double compute) {
  if (!p.cfg.overlap_sums) return sums_end(segs, {});
  return std::max(0.0, sums_end(segs, ready) - compute);
}

double exposed_sync(const problem& p, const std::vector<const group_shape*>& active, const std::vector<double>& shares,
                    const std::vector<double>& time_s) {
  const auto segs = sum_segments(p, active, shares);
  if (segs.empty()) return 0;
  std::vector<std::vector<double>> ready;
  for (std::size_t g = 0; g < active.size(); ++g) ready.push_back(stage_ready(p, *active[g], shares[g], time_s[g]));
  return exposed_sync(p, segs, ready, *std::max_element(time_s.begin(), time_s.end()));
}

double update_time(const problem& p, const std::vector<const group_shape*>& active) {
  double worst = 0;
  for (const auto* g : active)
    for (int j = 0; j < g->stages(); ++j)
      worst = std::max(worst, p.sums.update(g->splits[j], g->splits[j + 1]) / p.speed(g->devices[j]));
  return worst;
}

holdings::holdings(const problem& p, const plan* previous) {
  if (!previous) return;
  range_.assign(p.cluster.devices.size(), {0, 0});
  by_layer_.assign(p.num_layers(), {});
  for (const auto& g : previous->groups) {
    if (g.splits.size() != g.devices.size() + 1) continue;
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      const int d = p.links.index_of(g.devices[j]);
      if (d < 0 || !p.cluster.devices[d].available) continue;
      const int lo = std::max(0, g.splits[j]), hi = std::min(p.num_layers(), g.splits[j + 1]);
      range_[d] = {lo, hi};
      for (int l = lo; l < hi; ++l) by_layer_[l].push_back(d);
    }
  }
}

std::pair<double, double> holdings::bring(const problem& p, int dev, int lo, int hi) const {
  if (by_layer_.empty()) return {0, 0};  // first plan: nothing to move
  const auto [hlo, hhi] = range_[dev];
  double seconds = 0, bytes = 0, worst_lat = 0;
  const double factor = 1.0 + p.model.optimizer_state_factor;
  for (int l = lo; l < hi; ++l) {
    if (l >= hlo && l < hhi) continue;
    const double b = factor * p.sums.params(l, l + 1);
    double best_bw = 0, lat = 0;
    for (int src : by_layer_[l]) {
      const double bw = p.links.bw(src, dev);
      if (bw > best_bw) { best_bw = bw; lat = p.links.lat(src, dev); }
    }
    if (best_bw <= 0) best_bw = p.cluster.checkpoint_bw;
    seconds += b / best_bw;
    bytes += b;
    worst_lat = std::max(worst_lat, lat);
  }
  return {seconds + worst_lat, bytes};
}

}  // namespace dynapar::planner
