#include "step/layout.hpp"

#include <algorithm>

#include "schedule/dispatch.hpp"

namespace dynapar::step {
layout make_layout(const planner::plan& p, int batch, const layout_options& o) {
  layout l;
  const std::size_t G = p.groups.size();
  l.probe.assign(G, 0);
  if (o.dispatch && o.probe > 0) {
    if (o.exact)
      for (const auto& gp : p.groups)
        if (gp.devices.size() == 1) l.unit = std::max(l.unit, gp.micro_batch);
    std::vector<int> eligible;  // single-device groups' shares (exact: of whole units)
    for (const auto& gp : p.groups)
      eligible.push_back(gp.devices.size() == 1 && (!o.exact || std::max(1, gp.micro_batch) == l.unit) ? gp.share : 0);
    l.probe = schedule::probes(eligible, o.probe, l.unit);
  }
  int cursor = 0;
  auto open = [&](std::size_t g, int n, bool more) {
    l.opening.push_back({g, cursor, cursor + n, l.micro_batches, more});
    l.micro_batches += planner::micro_batches(n, p.groups[g].micro_batch);
    cursor += n;
  };
  for (std::size_t g = 0; g < G; ++g)
    if (l.probes(g)) open(g, l.probe[g], true);
  for (std::size_t g = 0; g < G; ++g)
    if (!l.probes(g)) open(g, p.groups[g].share, false);
  l.pool = batch - cursor;
  l.pool_at = cursor;
  l.pool_micro = l.micro_batches;
  if (l.pool > 0) l.micro_batches += (l.pool + l.unit - 1) / l.unit;  // exact: the pool's units are micro-batches
  return l;
}

std::vector<slice> rest_slices(const layout& l, const std::vector<int>& rest) {
  std::vector<slice> out;
  int lo = l.pool_at;
  for (std::size_t g = 0; g < rest.size(); ++g) {
    if (rest[g] < 0) continue;  // not dispatched to
    out.push_back({g, lo, lo + rest[g], l.pool_micro + (lo - l.pool_at) / l.unit, false});
    lo += rest[g];
  }
  return out;
}

int dispatched_micro_batches(int probe, int rest, int micro_batch) {
  return planner::micro_batches(probe, micro_batch) + planner::micro_batches(std::max(0, rest), micro_batch);
}

}  // namespace dynapar::step
