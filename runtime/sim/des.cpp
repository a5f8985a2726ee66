#include "sim/des.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

#include "planner/time_model.hpp"
#include "schedule/dispatch.hpp"
#include "schedule/schedule.hpp"
#include "step/attempt.hpp"

namespace dynapar::sim {
namespace {

struct op {
  bool forward;
  int micro;
};

// The compute instructions of every stage, in the order the schedule module generates them
// (its sends and receives are what the DES models as link transfers).
std::vector<std::vector<op>> stage_orders(planner::schedule_kind kind, int n, int m) {
  const auto pipe = schedule::generate(kind, n, m);
  std::vector<std::vector<op>> out(n);
  for (int j = 0; j < n; ++j)
    for (const auto& in : pipe.programs[j])
      if (in.kind == schedule::op::forward || in.kind == schedule::op::backward)
        out[j].push_back({in.kind == schedule::op::forward, in.micro});
  return out;
}

struct ev {
  double t;
  long seq;
  int kind;  // 0 op done, 1 transfer done
  int a, b;  // op: stage, index; transfer: link, transfer index
  bool operator>(const ev& o) const { return t > o.t || (t == o.t && seq > o.seq); }
};

}  // namespace

double simulate_pipeline(const planner::problem& truth, planner::schedule_kind kind, const planner::group_plan& g,
                         std::vector<control::stage_measure>* stages, std::vector<control::link_measure>* links,
                         std::vector<double>* finish) {
  const int n = static_cast<int>(g.devices.size());
  const int u = std::max(1, g.micro_batch);
  const int m = planner::micro_batches(g.share, u);
  if (m == 0) {
    if (finish) finish->assign(n, 0.0);
    return 0;
  }
  std::vector<int> dev(n);
  for (int j = 0; j < n; ++j) dev[j] = truth.links.index_of(g.devices[j]);
  auto size_of = [&](int k) { return k + 1 < m ? u : g.share - (m - 1) * u; };
  const auto& sums = truth.sums;
  auto duration = [&](int j, const op& o) {
    const int lo = g.splits[j], hi = g.splits[j + 1];
    const double per_sample = o.forward ? sums.fwd(lo, hi) : sums.work(lo, hi) - sums.fwd(lo, hi);
    return (size_of(o.micro) * per_sample + 0.5 * sums.fixed(lo, hi)) / truth.speed(dev[j]);
  };
  const std::vector<std::vector<op>> order = stage_orders(kind, n, m);
  std::vector<std::size_t> next(n, 0);
  std::vector<char> busy(n, 0);
  // Arrival times of inputs: forward activation at stage j, gradient at stage j; -1 pending.
  std::vector<std::vector<double>> fwd_in(n, std::vector<double>(m, -1)), bwd_in(n, std::vector<double>(m, -1));
  std::vector<std::vector<char>> fwd_done(n, std::vector<char>(m, 0));
  for (int k = 0; k < m; ++k) fwd_in[0][k] = 0;  // the first stage loads its data
  struct transfer { bool forward; int micro; };
  std::vector<std::deque<transfer>> queue(std::max(0, n - 1));
  std::vector<char> link_busy(std::max(0, n - 1), 0);
  std::vector<double> link_busy_s(std::max(0, n - 1), 0), link_bytes(std::max(0, n - 1), 0);
  std::vector<double> compute(n, 0), last(n, 0);
  std::priority_queue<ev, std::vector<ev>, std::greater<ev>> events;
  long seq = 0;
  double now = 0, end = 0;
  std::vector<transfer> in_flight(std::max(0, n - 1));

  auto try_stage = [&](int j) {
    if (busy[j] || next[j] >= order[j].size()) return;
    const op& o = order[j][next[j]];
    const bool ready = o.forward ? fwd_in[j][o.micro] >= 0
                                 : fwd_done[j][o.micro] && (j == n - 1 || bwd_in[j][o.micro] >= 0);
    if (!ready) return;
    busy[j] = 1;
    const double d = duration(j, o);
    compute[j] += d;
    events.push({now + d, seq++, 0, j, static_cast<int>(next[j])});
  };
  auto try_link = [&](int l) {
    if (link_busy[l] || queue[l].empty()) return;
    const transfer t = queue[l].front();
    queue[l].pop_front();
    link_busy[l] = 1;
    in_flight[l] = t;
    const int cut = g.splits[l + 1];
    const double bytes = size_of(t.micro) * sums.boundary_bytes(cut);
    const double d = bytes / truth.links.bw(dev[l], dev[l + 1]) + truth.links.lat(dev[l], dev[l + 1]);
    link_busy_s[l] += d;
    link_bytes[l] += bytes;
    events.push({now + d, seq++, 1, l, 0});
  };
  for (int j = 0; j < n; ++j) try_stage(j);
  while (!events.empty()) {
    const ev e = events.top();
    events.pop();
    now = e.t;
    end = std::max(end, now);
    if (e.kind == 0) {
      const int j = e.a;
      const op o = order[j][e.b];
      busy[j] = 0;
      ++next[j];
      last[j] = now;
      if (o.forward) {
        fwd_done[j][o.micro] = 1;
        if (j + 1 < n) { queue[j].push_back({true, o.micro}); try_link(j); }
      } else if (j > 0) {
        queue[j - 1].push_back({false, o.micro});
        try_link(j - 1);
      }
      try_stage(j);
    } else {
      const int l = e.a;
      const transfer t = in_flight[l];
      link_busy[l] = 0;
      if (t.forward) { fwd_in[l + 1][t.micro] = now; try_stage(l + 1); }
      else { bwd_in[l][t.micro] = now; try_stage(l); }
      try_link(l);
    }
  }
  if (finish) *finish = last;
  if (stages)
    for (int j = 0; j < n; ++j)
      stages->push_back({g.devices[j], g.splits[j], g.splits[j + 1], compute[j], static_cast<double>(g.share), m});
  if (links)
    for (int l = 0; l + 1 < n; ++l) links->push_back({g.devices[l], g.devices[l + 1], link_bytes[l], link_busy_s[l], 2 * m});
  return end;
}

std::vector<dispatch_share> dispatched(const planner::problem& truth, const planner::plan& p, const step::layout_options& opts) {
  std::vector<dispatch_share> out(p.groups.size());
  const int L = truth.model.num_layers();
  const auto& sums = truth.sums;
  int batch = 0;
  for (const auto& gp : p.groups) batch += gp.share;
  const auto l = step::make_layout(p, batch, opts);  // the driver's rule: probes, pool and unit
  std::vector<std::size_t> takers;
  for (std::size_t g = 0; g < p.groups.size(); ++g)
    if ((out[g].probe = l.probe[g]) > 0) takers.push_back(g);
  // Seconds on a group's device for `n` samples in micro-batches of the plan's size.
  auto busy = [&](std::size_t g, int n) {
    return n > 0 ? (n * sums.work(0, L) + planner::micro_batches(n, p.groups[g].micro_batch) * sums.fixed(0, L)) / truth.speed(truth.links.index_of(p.groups[g].devices[0])) : 0.0;
  };
  if (takers.empty()) return out;
  // The decision is the driver's (step::attempt), fed the probes' simulated ends: every
  // probe's first forward and end by the first probe's end (ties included), no priors.
  double decide = 1e300;  // the first probe's end
  for (std::size_t g : takers) decide = std::min(decide, out[g].probe_s = busy(g, out[g].probe));
  step::attempt at(0, p, l, schedule::pace_noise{}, {sums.work(0, L) / sums.fwd(0, L), true});
  for (std::size_t g : takers) {
    const int device = p.groups[g].devices[0];
    const int first = std::min(out[g].probe, std::max(1, p.groups[g].micro_batch));
    const double fwd = (first * sums.fwd(0, L) + 0.5 * sums.fixed(0, L)) / truth.speed(truth.links.index_of(device));
    if (fwd <= decide) at.note(device, 1, fwd, fwd);
    if (out[g].probe_s <= decide) at.note(device, 2, out[g].probe_s, out[g].probe_s);
  }
  at.decide(decide);
  for (std::size_t g : takers) {
    auto& o = out[g];
    o.rest = std::max(0, at.rests()[g]);
    o.time_s = o.probe_s + busy(g, o.rest);
  }
  return out;
}

step_outcome simulate_step(const planner::problem& truth, const planner::plan& p, const planner::plan* previous,
                           const step::layout_options& dispatch) {
  step_outcome out;
  std::vector<planner::group_shape> shapes;
  std::vector<std::vector<double>> ready;  // per group and stage: its backward done
  const auto shared = dispatched(truth, p, dispatch);
  std::vector<double> shares;
  for (std::size_t k = 0; k < p.groups.size(); ++k) {
    const auto& g = p.groups[k];
    const auto& o = shared[k];
    ready.emplace_back();
    double t = 0;
    if (o.probe > 0) {
      t = o.time_s;
      const int n_micro = step::dispatched_micro_batches(o.probe, o.rest, g.micro_batch);
      out.stages.push_back({g.devices[0], 0, truth.model.num_layers(), t, static_cast<double>(o.probe + o.rest), n_micro});
      ready.back().push_back(t);
      shares.push_back(o.rest > 0 ? o.rest : o.probe);
    } else {
      t = simulate_pipeline(truth, p.schedule, g, &out.stages, &out.links, &ready.back());
      shares.push_back(g.share);
    }
    out.group_s.push_back(t);
    out.compute_s = std::max(out.compute_s, t);
    std::vector<int> idx;
    for (int id : g.devices) idx.push_back(truth.links.index_of(id));
    shapes.push_back(planner::make_shape(truth, idx, g.splits, std::max(1, g.micro_batch)));
  }
  std::vector<const planner::group_shape*> active;
  for (const auto& s : shapes) active.push_back(&s);
  out.sync_s = planner::exposed_sync(truth, planner::sum_segments(truth, active, shares), ready, out.compute_s);
  out.update_s = planner::update_time(truth, active);
  const planner::holdings held(truth, previous);
  for (const auto& s : shapes)
    for (int j = 0; j < s.stages(); ++j) {
      const auto [sec, bytes] = held.bring(truth, s.devices[j], s.splits[j], s.splits[j + 1]);
      out.migration_s = std::max(out.migration_s, sec);
      out.bytes_migrated += bytes;
    }
  out.time_s = out.compute_s + out.sync_s + out.update_s + out.migration_s;
  return out;
}

}  // namespace dynapar::sim
