// The true cluster slot by slot: nominal specs moved by traces, events and seeded random
// processes. Deterministic in (scenario, seed): every policy meets the same world. Pure.
#pragma once

#include <vector>

#include "common/rng.hpp"
#include "sim/scenario.hpp"

namespace dynapar::sim {

class world {
 public:
  explicit world(const scenario& s);
  // Advances to `slot` (called with 0, 1, 2, ...) and returns the true cluster then.
  const planner::cluster_state& at(int slot);
  // Devices that fail during `slot` (unannounced: plans made at the slot may use them).
  std::vector<int> failing(int slot) const;

 private:
  const scenario& s_;
  rng rng_;
  planner::cluster_state now_;
  std::vector<double> walk_, price_mult_;
  std::vector<char> burst_, event_available_;
  std::vector<int> away_until_;  // random departures: slot of return (-1 none, INT_MAX never)
  int slot_ = -1;
};

double trace_value(const std::vector<trace_point>& t, int slot, double fallback);

}  // namespace dynapar::sim
