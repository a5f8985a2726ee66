// What a training run reports as it goes (steps, plans, faults, checkpoints, epochs) and at
// its end. records_json.hpp writes them as metrics.jsonl, plans.jsonl and summary.json.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/measurement.hpp"
#include "data/ledger.hpp"
#include "model/api.hpp"
#include "planner/plan.hpp"
#include "training/settings.hpp"

namespace dynapar::training {

struct step_record {
  std::int64_t step = 0;
  double loss = 0;                   // mean over the batch
  double lr = 0;                     // the learning rate the step applied (the optimizer's schedule)
  double time_s = 0;                 // driver wall clock: migration, pipelines, sums, apply
  double pipeline_s = 0;             // slowest group's pipeline
  double sync_s = 0;                 // emulated network time of the cross-group sums the pipelines did not hide
  double update_s = 0;               // the holders' optimizer steps, until the last is done
  double migration_s = 0;            // moving layers before this step
  double bytes_migrated = 0;
  double cost = 0;                   // sum of the used devices' price x time_s
  double predicted_s = 0;            // the controller's prediction for the plan in force (0: none)
  double cost_queue = 0;             // the controller's cost queue at its latest decision
  // The control round trip on the step's critical path: the least any device of the step
  // waited between its update of the step before and this step's task (control::stage_figures::idle_s).
  // The device that updated last waits least: the others' waits add the step's imbalance.
  double controller_wait_s = 0;
  std::vector<control::stage_figures> stages;  // with the samples each ran; metrics.jsonl leaves links out
};

// A plan taking effect: plans.jsonl.
struct plan_record {
  std::int64_t step = 0, slot = 0;
  planner::plan plan;
  std::string reason;
  double predicted_s = 0;
  double queue = 0;
  int layers_moved = 0;
  double bytes_migrated = 0;
  double migration_s = 0;
  std::vector<int> joined, left;     // devices entering / leaving the plan
};

// A fault injected, a device found lost, a recovery or a retried step: metrics.jsonl.
struct fault_record {
  std::int64_t step = 0;
  std::string event;                 // injected, lost, recovered, retried, ended (a slow-down)
  std::string kind;                  // kill, slow, pause, partition; lost: crash
  int device = -1;
  std::string source;                // injected: plan (the job's faults or dynamics), inject
  std::string detail;
  double seconds = 0;                // recovered: recovery time; pause, partition: duration
};

struct train_callbacks {
  std::function<void(const step_record&)> on_step;
  std::function<void(const plan_record&)> on_plan;
  // Writes a checkpoint. Gathered layers should not block (write in the background); shards
  // are committed before it returns, their paths then where the commit put them, as the run
  // rolls back to them. An error: the checkpoint was not written (the one before stays).
  std::function<status(checkpoint&)> on_checkpoint;
  // Where the holders write the shards of the checkpoint after `step` steps (a directory every
  // process of the run sees, created; "" or unset: the layers are gathered instead).
  std::function<std::string(std::int64_t)> shard_dir;
  // The directory shard_dir's directories are in: what local nodes get as --shard-dir.
  std::string shard_root;
  std::function<void(const fault_record&)> on_fault;
  // After each epoch's last step, with train_settings::test_set: the epoch (1-based) and the
  // validation set's metric (accuracy, or a regression's MSE: model::metric_of).
  std::function<void(std::int64_t, double)> on_epoch;
  // While the run waits for devices to join (train_settings::rejoin_wait_s): why none can
  // come any more (every node process a launch started has exited, and none is restarted),
  // which ends the wait at once; "" or unset: waiting may still bring one.
  std::function<std::string()> no_replacements;
};

struct train_outcome {
  std::int64_t steps = 0;
  double mean_step_time_s = 0;
  double samples_per_s = 0;
  // One replica per layer in train_settings::final_layers' form (none for `hash`).
  // final_hashes: each layer's whole state hashed (model::state_hashes), where it was.
  std::vector<model::layer_copy> final_layers;
  std::vector<std::uint64_t> final_hashes;
  // Every replica of every layer at the end, whatever hash_every is (the final replica
  // check): by layer, each holder's whole state hashed where it is.
  struct replica_hash {
    int device = -1;
    std::string place;
    std::uint64_t hash = 0;
  };
  std::vector<std::vector<replica_hash>> replica_hashes;
  std::optional<double> test_metric;  // of train_settings::test_set after the last step
  int hash_checks = 0;
  data::ledger_report ledger;
  int messages_per_step = 0;
  int replans = 0;                   // plan changes after the first plan
  int layers_moved = 0;              // (device, layer) placements a device did not hold before
  int plans_kept = 0;                // plan changes the controller turned down (hysteresis, regret)
  int plans_reverted = 0;            // plan changes undone after they measured slower (regret check)
  double bytes_migrated = 0;
  double avg_cost = 0;               // per step
  std::map<int, double> avg_energy_j; // per step, by device (power_w x compute time)
  int joins = 0, leaves = 0;         // devices arriving / departing during the run
  planner::plan final_plan;
  std::int64_t resumed_from = 0;     // the first step this run executed
  int checkpoints = 0;
  // Faults (docs/RELIABILITY.md): faults injected (the dynamics' `fail` events, the job's
  // fault plan, `dynapar inject`), devices found lost, recoveries (detection, re-plan and
  // migration, until training goes on), and steps retried after missing their deadline with
  // every device still answering.
  int faults_injected = 0, devices_lost = 0, recoveries = 0, step_retries = 0;
  double mean_recovery_s = 0, max_recovery_s = 0;
  // Steady steps (no layer moved, no fault or retry, not the run's first): the mean of
  // step_record::controller_wait_s, and its share of their time (issue 51: ~0 once control
  // is pipelined).
  double controller_wait_s = 0, controller_wait_share = 0;
  int steady_steps = 0;
  // Steps whose tasks went out with the step before's commit (pipelined control).
  int steps_started_early = 0;
  // Over processes: tensor bytes through the controller's process by kind
  // (remote_devices::tensor_bytes); empty in one process.
  std::map<std::string, double> controller_tensor_bytes;
  // Over processes: each node's peak resident memory (MB) as its heartbeats said, by node.
  std::map<std::string, double> node_peak_rss_mb;
  // By device: the bytes of the other holders' chunks it received for the holders' sums
  // (peer_sum), in the run; empty with the driver's sum.
  std::map<int, double> sum_received_bytes;
  // By device: the bytes it sent to other devices in the run's steps (activations and
  // gradients between pipeline stages, as its links counted them; layers moved are in
  // bytes_migrated; the gradient sums' traffic and evaluations' activations are not counted).
  std::map<int, double> data_plane_bytes;
};

}  // namespace dynapar::training
