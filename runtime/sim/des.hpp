// Discrete-event simulation of one training step under the true cluster: micro-batches
// through each group's stages in schedule order (GPipe or 1F1B), each link a FIFO resource
// shared by activations and gradients, the segment-wise gradient sums (overlapped with the
// pipelines' backward where the planner config says so), then migration.
// This, not the planner's closed form, is what a step "really" takes in the simulator. Pure.
#pragma once

#include <vector>

#include "control/measurement.hpp"
#include "planner/problem.hpp"
#include "step/layout.hpp"

namespace dynapar::sim {

struct step_outcome {
  double time_s = 0;        // the whole step
  double compute_s = 0;     // slowest group's pipeline
  double sync_s = 0;
  double update_s = 0;      // the slowest holder's optimizer steps
  double migration_s = 0;
  double bytes_migrated = 0;
  std::vector<double> group_s;
  std::vector<control::stage_measure> stages;
  std::vector<control::link_measure> links;
};

// One group's pipeline, simulated event by event: per-stage instruction order from the
// schedule, dependencies through links. Returns the flush time; `finish` (if given) gets when
// each stage ended its last instruction.
double simulate_pipeline(const planner::problem& truth, planner::schedule_kind kind, const planner::group_plan& g,
                         std::vector<control::stage_measure>* stages, std::vector<control::link_measure>* links,
                         std::vector<double>* finish = nullptr);

// Within-step dispatch (schedule/dispatch.hpp) as the training driver runs it: the probes,
// pool and unit of the driver's layout (step/layout.hpp) under the true speeds, the rest
// handed out when the first probe ends, by what the probes showed by then (a first forward,
// or a whole probe). Groups that take no part: probe 0.
struct dispatch_share {
  int probe = 0, rest = 0;  // samples
  double probe_s = 0;       // the probe's end
  double time_s = 0;        // the rest's end
};
std::vector<dispatch_share> dispatched(const planner::problem& truth, const planner::plan& p, const step::layout_options& o);

// The whole step; `previous` drives migration. The plan must use only devices of `truth`.
// `dispatch`: within-step dispatch, where it may run.
step_outcome simulate_step(const planner::problem& truth, const planner::plan& p, const planner::plan* previous,
                           const step::layout_options& dispatch = {});

}  // namespace dynapar::sim
