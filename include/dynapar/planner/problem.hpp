// Everything one slot's decision reads, bundled with the lookup tables built from it.
// Built once per slot; read-only afterwards (safe to share between threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/cluster.hpp"
#include "planner/plan.hpp"
#include "planner/profile.hpp"

namespace dynapar::planner {

struct planner_config {
  int batch = 256;                                  // B, samples per global step
  schedule_kind schedule = schedule_kind::one_f_one_b;
  int micro_batch = 0;                              // 0: chosen per group from the candidates
  std::vector<int> micro_batch_candidates = {1, 2, 4, 8, 16, 32, 64};
  double v = 10.0;                                  // Lyapunov trade-off V (weighs T / T_floor)
  int eval_budget = 20000;                          // plan evaluations for a fresh decision, scaled
                                                    // by 64 / max(16, devices) (an evaluation
                                                    // costs O(devices))
  int warm_eval_budget = 64;                        // per slot when warm-started on the same devices
  int search_stall_kicks = 64;                      // a search ends after this many fruitless kicks
  // Steps a new plan is expected to run: its migration is paid once over them, so a plan is
  // scored by its mean step over them (docs/MODEL.md). control::paced sets it to the plan's
  // expected life, the horizon the hysteresis weighs migration over too.
  int plan_steps = 1;
  // A one-off migration's share of each of those steps.
  double per_step(double migration_s) const { return migration_s / std::max(1, plan_steps); }
  double research_queue_shift = 0.5;                // a full search also when the cost queue moved this
                                                    // many budgets since the last one
  int max_stages = 16;                              // longest pipeline considered
  double replan_margin = 0.02;                      // a new structure must score this much better
  int share_quantum = 1;                            // shares are multiples of this (exact training)
  std::uint64_t seed = 1;                           // for sampled neighbourhoods on large clusters
  // A holder starts its cross-group sums when its stage finishes the step's backward, not
  // when the slowest group does (docs/MODEL.md). On by default since 2026-11-25: no example
  // scenario got slower with it (docs/BENCHMARKS.md, "Sums overlapped with backward").
  bool overlap_sums = true;
  // With overlap_sums, a segment's layers are summed in buckets (planner/buckets.hpp), filled
  // from its top layer down (backward's order) and closed at this many bytes of parameters, so
  // that a bucket's sum starts once backward has passed it. The runtime sums the same buckets
  // (training::train_settings::bucket_bytes); 8 MiB ran fastest there, against one bucket a
  // layer or one for all (docs/RUNTIME.md). Each bucket pays the ring's latency
  // once, so the model also has it hold at least what takes `sum_bucket_latencies` times that
  // latency to move: on slow or long rings (edge links, a thousand groups) buckets grow, up to
  // one a segment (docs/BENCHMARKS.md). The runtime does not know its rings' latency and
  // keeps to `sum_bucket_bytes` (docs/MODEL.md, "Known gaps").
  double sum_bucket_bytes = 8 << 20;
  double sum_bucket_latencies = 4;
  // Within-step dispatch (schedule/dispatch.hpp; docs/MODEL.md): single-device groups run this
  // part of their share as a probe, and the rest of their shares goes out when the first probe
  // ends, by each device's pace in this step. 0: the plan's shares stand. How a step runs,
  // in the simulator and in training alike; the planner's predictions do not depend on it.
  // On by default since 2026-11-26 (docs/BENCHMARKS.md, "Within-step dispatch").
  double dispatch_probe = 0.33;
};

struct budgets {
  double cost_per_slot = unlimited;                 // C_bar: time-average cost per slot
  struct energy { int device_id; double joules_per_slot; };
  std::vector<energy> energy_per_slot;              // E_bar_d, optional
  // Slots the run lasts, when known (0: unknown). The cost and energy budgets are then paced
  // over what is left (docs/MODEL.md, "Budget pacing"), so that the run ends within them.
  int horizon_slots = 0;
  // With a known horizon, what a slot may spend a step before the score's guard term binds
  // (docs/MODEL.md, "Budget pacing"): (1 + slot_slack) times what is left of the run's budget
  // over the slots left, and never more than is left. Slack lets the queues trade dear slots
  // for cheap ones, which a short run has too few slots to pay back; a slack of H or more
  // guards the last slot only.
  double slot_slack = 0;
  // ... and at least this share of what is left of the run's budget: on a long run one slot
  // may overspend as far as cuts each later slot's share by about this fraction, so the
  // queues can trade dear slots for cheap ones; within the last 1 / payback slots the
  // allowance above stands alone (0: it always does).
  double payback = 0.05;
  bool has_cost() const { return cost_per_slot != unlimited; }
};

// Lyapunov virtual queue backlogs at the start of a slot.
struct queue_state {
  double cost = 0;                                  // Q(t)
  std::vector<std::pair<int, double>> energy;       // (device id, Z_d(t))
  double cost_budget = 0;   // the slot's paced cost budget (0: budgets::cost_per_slot)
  // The slot's paced energy budgets and the joules spent so far, by device (as `energy`).
  std::vector<std::pair<int, double>> energy_budget{}, energy_spent{};
  double spent = 0;         // cost of the slots so far (pacing; restored from checkpoints)
  int slots = 0;            // slots so far
  // Measured step time over predicted, lately (the controller's; 1: unknown). A step's cost
  // is price x measured time, so the pacing divides the slot's cost allowance by it.
  double time_ratio = 1;
};

// Refers to its model and cluster (no copies per decision): they must outlive it. Temporaries
// are refused at compile time; a problem over a temporary cluster read freed memory.
struct problem {
  problem(const model_profile& m, const cluster_state& c, planner_config cfg_in, budgets b = {});
  problem(const model_profile&, cluster_state&&, planner_config, budgets = {}) = delete;
  problem(model_profile&&, const cluster_state&, planner_config, budgets = {}) = delete;
  const model_profile& model;
  const cluster_state& cluster;
  planner_config cfg;
  budgets budget;
  profile_sums sums;
  link_table links;
  std::vector<int> available;  // device indices, in cluster order
  int num_layers() const { return sums.num_layers(); }
  double speed(int i) const { return cluster.devices[i].speed; }
  double memory(int i) const { return cluster.devices[i].memory_bytes; }
  double floor_s() const;      // docs/MODEL.md, "Solving one slot"
};

// Validates model, cluster and config together; the message names the field.
status validate(const model_profile& m, const cluster_state& c, const planner_config& cfg);

}  // namespace dynapar::planner
