// Runs training in one process: a group supervisor per plan group, a device actor per device,
// and this driver, which feeds each group its share of every step, sums each layer's
// gradients across the groups holding it (divided by the batch) and has every holder apply
// them. No CAF or torch in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "data/dataset.hpp"
#include "data/ledger.hpp"
#include "model/api.hpp"
#include "planner/plan.hpp"
#include "planner/problem.hpp"

namespace dynapar::actors {

// Online re-planning: a controller actor learns speeds from the stage reports and decides
// the plan every `replan_every` steps.
struct controller_config {
  std::string policy = "joint_lyapunov";
  planner::model_profile profile;     // measured at start
  planner::cluster_state cluster;     // nominal specs (speeds are only the first estimate)
  planner::planner_config planner;
  planner::budgets budget;
  int replan_every = 10;              // steps a slot
};

struct train_settings {
  planner::plan plan;
  std::int64_t steps = 100;
  int batch = 64;
  std::uint64_t seed = 1;            // sampler seed (the model's is in the model)
  model::optimizer_config optimizer;
  int hash_every = 50;               // compare replica hashes every N steps (0: never)
  int scheduler_threads = 1;        // supervisors only: devices are detached threads
  double step_timeout_s = 120;
  // Fault injection: after step `perturb_step`, nudge group `perturb_group`'s replica of layer
  // `perturb_layer` (-1: never), as a silent corruption the replica hashes must catch.
  std::int64_t perturb_step = -1;
  int perturb_group = 0, perturb_layer = 0;
  // Plans that take effect before the given steps (in step order). Between steps the layers
  // move, with their optimizer state, to the devices of the new plan; groups form, split and
  // merge freely.
  std::vector<std::pair<std::int64_t, planner::plan>> replans;
  // Emulated relative speed (0, 1] by device id; absent: full speed (docs/RUNTIME.md).
  std::map<int, double> speeds;
  // With a controller, its first plan replaces `plan` and it may change the plan every slot.
  std::optional<controller_config> controller;
};

struct stage_timing {
  int device = 0;
  double compute_s = 0, wait_s = 0;
  int messages = 0;
};

struct step_record {
  std::int64_t step = 0;
  double loss = 0;                   // mean over the batch
  double time_s = 0;                 // driver wall clock, gradient sums included
  double pipeline_s = 0;             // slowest group's pipeline
  std::vector<stage_timing> stages;
};

struct train_outcome {
  std::int64_t steps = 0;
  double mean_step_time_s = 0;
  double samples_per_s = 0;
  std::vector<model::layer_copy> final_layers;  // one replica per layer
  int hash_checks = 0;
  data::ledger_report ledger;
  int messages_per_step = 0;
  int replans = 0;
  int layers_moved = 0;
  planner::plan final_plan;              // (device, layer) placements that device did not hold before
};

result<train_outcome> train(const model::model_chain& m, const data::dataset& train_data, const train_settings& s,
                            const std::function<void(const step_record&)>& on_step = {});

}  // namespace dynapar::actors
