// Prices a complete plan: the explanation `dynapar plan` prints and the simulator logs.
// Pure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "planner/problem.hpp"

namespace dynapar::planner {

struct group_report {
  std::vector<int> devices;       // ids, pipeline order
  std::vector<int> splits;
  int share = 0;
  int micro_batch = 1;
  double time_s = 0;              // T_g(b_g)
  double bottleneck_s = 0;        // R_g per micro-batch
  std::string bottleneck;         // "stage 1 (device 7)" or "link 0->1 (devices 3->7)"
  std::vector<double> stage_s;    // per micro-batch
  std::vector<double> link_s;
  double cap = 0;                 // memory cap on the share
};

struct plan_report {
  double batch_time_s = 0;        // T = max_g T_g + T_sync + T_upd + T_mig
  double compute_s = 0;           // max_g T_g
  double sync_s = 0;              // the sums' part the pipelines do not hide (time_model.hpp exposed_sync)
  double update_s = 0;            // the slowest holder's optimizer steps
  double migration_s = 0;
  double bytes_migrated = 0;
  double cost = 0;                // sum of used devices' price * T
  double price_per_s = 0;         // of the used devices
  double energy_j = 0;            // sum of E_d
  std::vector<std::pair<int, double>> device_energy_j;  // (id, E_d)
  std::vector<std::pair<int, double>> device_busy_s;    // (id, busy seconds)
  double floor_s = 0;
  double efficiency = 0;          // floor / T
  double time_term = 0, cost_term = 0, energy_term = 0, score = 0;  // V T, Q C, sum Z E
  double guard_term = 0;          // > 0: over what is left of the run's budget (score_weights)
  std::vector<group_report> groups;
};

// Validates the plan against the problem (devices known and available, splits, shares,
// memory) and prices it. `previous` drives migration; `queues` the score's queue terms.
result<plan_report> evaluate(const problem& p, const plan& pl, const plan* previous, const queue_state& queues);

// Drift-plus-penalty weights, shared by search and evaluation so the two cannot drift apart:
// score = time * T + cost * C + sum_d energy[d] * E_d with time = V / T_floor, cost = Q / C_bar,
// energy[d] = Z_d / E_bar_d (queues count budgets overspent; see docs/MODEL.md).
//
// With a known horizon, one more term paces the run (docs/MODEL.md, "Budget pacing"): a slot
// may spend a step what is left of the run's budget over the slots left (times 1 +
// budgets::slot_slack, never more than is left). A plan over that allowance pays `guard` per
// unit of the overspend relative to the allowance: more than any plan within it can score,
// so it is chosen only when every plan is over (then the least over). A budget already spent
// has no allowance (0): the queues alone steer.
struct score_weights {
  double time = 0, cost = 0;
  std::vector<double> energy;  // per device index
  double cost_allowance = 0;   // cost a step this slot may spend at most (0: no guard)
  std::vector<double> energy_allowance;  // per device index, joules a step (0: no guard)
  double guard = 0;
  // The guard's term for a plan spending `spend` a step and `energy_j[d]` joules by device index.
  double over_allowance(double spend, const std::vector<double>& energy_j) const;
};
score_weights weights(const problem& p, const queue_state& q);

}  // namespace dynapar::planner
