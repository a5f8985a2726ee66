// One seeded chaos experiment (`dynapar chaos`, docs/RELIABILITY.md): random kills, hangs,
// slow-downs and partitions at random steps, a device leaving and joining again, and maybe the
// controller killed and resumed from its checkpoint. Pure: the same seed gives the same
// experiment, so a failing run replays from its seed alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/faults.hpp"
#include "sim/scenario.hpp"

namespace dynapar::sim {

struct chaos_config {
  std::int64_t steps = 0;        // the run's length
  int slot_steps = 1;            // steps per controller slot (dynamics events are per slot)
  std::vector<int> devices;      // the job's device ids
  int max_kills = 3, max_hangs = 1, max_slows = 2, max_partitions = 1;
  double hang_s = 6;             // a hang / partition: longer than the step deadline's floor (5 s)
  bool leaves = true;            // a device leaves and joins again (elastic)
  bool restarts = true;          // the controller may be killed and the run resumed
  bool hard_moments = true;       // half the kills wait for a hard moment (sim::draw_chaos); double kills; a kill at the first placement
};

struct chaos_experiment {
  std::uint64_t seed = 0;
  std::vector<fault> faults;     // device -1: one the plan in force uses, drawn when it fires
  std::vector<event> events;     // leave / join pairs
  std::int64_t restart_after = -1;  // kill the controller after this step's checkpoint (-1: never)
  std::string describe() const;  // "2 kills, 1 hang, leave d2 slots 3-5, restart after 40"
};

chaos_experiment draw_chaos(const chaos_config& c, std::uint64_t seed);

}  // namespace dynapar::sim
