// Discrete-event simulation of one training step under the true cluster: micro-batches
// through each group's stages in schedule order (GPipe or 1F1B), each link a FIFO resource
// shared by activations and gradients, then the segment-wise gradient sums, then migration.
// This, not the planner's closed form, is what a step "really" takes in the simulator. Pure.
#pragma once

#include <vector>

#include "planner/problem.hpp"

namespace dynapar::sim {

struct stage_measure {
  int device = 0;           // id
  int first_layer = 0, end_layer = 0;
  double compute_s = 0;     // busy computing in this step
  double samples = 0;
  int micro_batches = 0;
};

struct link_measure {
  int from = 0, to = 0;     // ids
  double bytes = 0;
  double busy_s = 0;        // time the link spent transferring
  int transfers = 0;
};

struct step_outcome {
  double time_s = 0;        // the whole step
  double compute_s = 0;     // slowest group's pipeline
  double sync_s = 0;
  double update_s = 0;      // the slowest holder's optimizer steps
  double migration_s = 0;
  double bytes_migrated = 0;
  std::vector<double> group_s;
  std::vector<stage_measure> stages;
  std::vector<link_measure> links;
};

// One group's pipeline, simulated event by event: per-stage instruction order from the
// schedule, dependencies through links. Returns the flush time.
double simulate_pipeline(const planner::problem& truth, planner::schedule_kind kind, const planner::group_plan& g,
                         std::vector<stage_measure>* stages, std::vector<link_measure>* links);

// The whole step; `previous` drives migration. The plan must use only devices of `truth`.
step_outcome simulate_step(const planner::problem& truth, const planner::plan& p, const planner::plan* previous);

}  // namespace dynapar::sim
