#include "sim/world.hpp"

#include <algorithm>
#include <climits>

namespace dynapar::sim {

double trace_value(const std::vector<trace_point>& t, int slot, double fallback) {
  double v = fallback;
  for (const auto& p : t) {
    if (p.slot > slot) break;
    v = p.value;
  }
  return v;
}

world::world(const scenario& s) : s_(s), rng_(s.seed ^ 0x5eed5eed5eedULL), now_(s.cluster) {
  const std::size_t n = s.cluster.devices.size();
  walk_.assign(n, 1.0);
  price_mult_.assign(n, 1.0);
  burst_.assign(n, 0);
  away_until_.assign(n, -1);
  event_available_.resize(n);
  for (std::size_t i = 0; i < n; ++i) event_available_[i] = s.cluster.devices[i].available;
}

const planner::cluster_state& world::at(int slot) {
  const auto& r = s_.random;
  const std::size_t n = s_.cluster.devices.size();
  while (slot_ < slot) {
    ++slot_;
    // Events at this slot change availability from now on (a failure too: the device is gone).
    for (const auto& e : s_.events)
      if (e.slot == slot_)
        for (std::size_t i = 0; i < n; ++i)
          if (s_.cluster.devices[i].id == e.device) event_available_[i] = e.kind == event_kind::join;
    for (std::size_t i = 0; i < n; ++i) {
      if (slot_ == 0) continue;  // the stochastic processes move from slot 1 on
      if (r.walk_sigma > 0) walk_[i] = std::clamp(walk_[i] * (1 + rng_.normal(0, r.walk_sigma)), r.walk_min, r.walk_max);
      if (r.burst_start > 0) {
        const double u = rng_.uniform();
        burst_[i] = burst_[i] ? (u >= r.burst_end) : (u < r.burst_start);
      }
      if (r.price_change > 0 && rng_.uniform() < r.price_change) price_mult_[i] = rng_.uniform(r.price_low, r.price_high);
      if (r.departure_rate > 0) {
        if (away_until_[i] >= 0 && slot_ >= away_until_[i]) away_until_[i] = -1;
        if (away_until_[i] < 0 && rng_.uniform() < r.departure_rate)
          away_until_[i] = r.rejoin_after > 0 ? slot_ + r.rejoin_after : INT_MAX;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto& base = s_.cluster.devices[i];
    auto& d = now_.devices[i];
    double speed = walk_[i] * (burst_[i] ? r.burst_slowdown : 1.0);
    double price = price_mult_[i];
    bool avail = event_available_[i] && away_until_[i] < 0;
    for (const auto& t : s_.traces) {
      if (t.device != base.id) continue;
      speed *= trace_value(t.speed, slot, 1.0);
      price *= trace_value(t.price, slot, 1.0);
      avail = avail && trace_value(t.available, slot, 1.0) > 0.5;
    }
    d.speed = base.speed * speed;
    d.price_per_s = base.price_per_s * price;
    d.available = avail;
  }
  now_.tiers = s_.cluster.tiers;
  for (const auto& lt : s_.link_traces) {
    auto& tier = lt.scope == link_scope::same_node ? now_.tiers.same_node
                 : lt.scope == link_scope::same_rack ? now_.tiers.same_rack : now_.tiers.cross_rack;
    const auto& base = lt.scope == link_scope::same_node ? s_.cluster.tiers.same_node
                       : lt.scope == link_scope::same_rack ? s_.cluster.tiers.same_rack : s_.cluster.tiers.cross_rack;
    tier.bw = base.bw * trace_value(lt.bandwidth, slot, 1.0);
  }
  return now_;
}

std::vector<int> world::failing(int slot) const {
  std::vector<int> out;
  for (const auto& e : s_.events)
    if (e.slot == slot && e.kind == event_kind::fail) out.push_back(e.device);
  return out;
}

}  // namespace dynapar::sim
