// Runs one policy through a scenario, slot by slot: the world moves, the policy decides from
// its estimates, the step is simulated, queues and estimates update. Pure and deterministic
// in the scenario's seed; independent per policy, so callers may run policies in parallel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "sim/scenario.hpp"

namespace dynapar::sim {

struct slot_record {
  int slot = 0;
  bool ok = false;              // false: the policy found no feasible plan this slot
  double batch_time_s = 0;
  double predicted_s = 0;       // the planner's own estimate for its plan
  double floor_s = 0;
  double cost = 0;
  double energy_j = 0;
  double cost_queue = 0;        // Q after this slot's update
  double bytes_migrated = 0;
  bool replanned = false;       // devices, order or splits changed
  bool failed = false;          // a device failed during the step (it was re-run)
  int devices_used = 0;
  std::vector<int> devices;     // the ids of those devices, in plan order
  int groups = 0;
};

struct summary {
  std::string policy;
  int slots = 0, ok_slots = 0;
  double mean_batch_time_s = 0, p95_batch_time_s = 0, throughput = 0;
  double avg_cost = 0;
  double budget = -1;           // < 0: none
  bool meets_budget = true;     // average cost within the budget (1 % tolerance)
  double avg_energy_j = 0;
  double efficiency = 0;        // mean floor / mean batch time
  double mean_floor_s = 0;
  double prediction_error = 0;  // mean |predicted - simulated| / simulated
  int replans = 0, failures = 0;
  double bytes_migrated = 0;
  double final_queue = 0;
  std::string error;            // why slots failed, if any did
};

struct run_result {
  summary sum;
  std::vector<slot_record> slots;
};

result<run_result> run_policy(const scenario& s, const std::string& policy, const std::function<void(int)>& on_slot = {});

summary summarise(const std::string& policy, const std::vector<slot_record>& slots, double budget);

}  // namespace dynapar::sim
