// A group: the devices of one pipeline for as long as a plan keeps them together. It monitors
// them, hands each stage its part of a step (the schedule as data, the emulated links) and
// reports the group's step with per-stage timings; a device that stops fails the step in
// flight instead of leaving it waiting. Re-formed by each plan that changes the group; the
// devices outlive it. Thin.
#pragma once

#include <caf/all.hpp>

#include <vector>

#include "actors/device_actor.hpp"
#include "planner/plan.hpp"

namespace dynapar::actors {

struct group_config {
  int group = 0;
  std::vector<int> devices;          // ids, pipeline order
  std::vector<device_handle> actors;  // the device actors, same order
  std::vector<int> splits;           // n + 1 cut points
  planner::schedule_kind schedule = planner::schedule_kind::one_f_one_b;
};

// A group takes a step's task (from the driver) and its stages' reports (from its devices).
using group_handle = caf::typed_actor<caf::reacts_to<step_atom, group_task>, caf::reacts_to<stage_report>>;

group_handle spawn_group(caf::actor_system& sys, const group_config& cfg);

}  // namespace dynapar::actors
