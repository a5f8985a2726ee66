// What one training step really took, as the controller learns from it: the same type for a
// step measured by the runtime (the driver's reports) and one played by the simulator
// (sim::simulate_step), so that both feed one controller. Pure.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "planner/plan.hpp"

namespace dynapar::control {

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

// One stage's figures in one step, as its device counted them: the one stage-report type. The
// device actor's report, the wire op a node sends it in (wire::ops::stage_report, with the
// attempt's tag, an error and a probe's progress around it), the step attempt's stages and the
// step record's (training::step_record) are these.
struct stage_figures {
  int device = 0;
  double compute_s = 0;    // forward and backward work
  double wait_s = 0;       // blocked on a receive
  int messages = 0;        // activations and gradients sent
  std::vector<link_measure> links;  // what each link it sent on did, as its NIC would count
  // From its update of the step before (its last sum applied) until this step's task came:
  // the time it waited on the controller between steps (0 when it did not update then).
  double idle_s = 0;
  double loss_sum = 0;     // last stage; of an evaluation, the metric's sum (model::score)
  int samples = 0;         // what it ran (with dispatch, not its share): the attempt's count
};

struct measurement {
  double time_s = 0;        // the whole step
  double cost = 0;          // price of the devices used x time
  std::vector<std::pair<int, double>> energy_j;  // power x compute seconds, by device
  std::vector<stage_measure> stages;
  std::vector<link_measure> links;
};

// The stages of plan `p` with each device's measured compute seconds (`compute_s`, by device
// id; devices not listed computed for 0 s): what a runtime step report lacks, the layers and
// samples each device worked on, comes from the plan that ran.
std::vector<stage_measure> stages_of(const planner::plan& p, const std::vector<std::pair<int, double>>& compute_s);

// A step's price, the one pricing of the driver and the simulator: from `time_s` and the
// stages, its cost (every stage's device at its price a second, for the whole step) and each
// device's energy (its power over its compute seconds), in the stages' order.
void price(measurement& m, const std::function<double(int)>& price_per_s, const std::function<double(int)>& power_w);

}  // namespace dynapar::control
