// A group: spawns and monitors its devices, hands each stage its part of a step (the
// schedule as data) and reports the group's step with per-stage timings. Thin.
#pragma once

#include <caf/all.hpp>

#include <vector>

#include "model/api.hpp"
#include "planner/plan.hpp"

namespace dynapar::actors {

struct group_config {
  int group = 0;
  std::vector<int> devices;   // ids, pipeline order
  std::vector<int> splits;    // n + 1 cut points
  planner::schedule_kind schedule = planner::schedule_kind::one_f_one_b;
  model::optimizer_config optimizer;
  std::vector<double> speeds;  // emulated relative speed per device (empty: all 1)
};

caf::actor spawn_group(caf::actor_system& sys, const group_config& cfg);

}  // namespace dynapar::actors
