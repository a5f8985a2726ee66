// What a training run is asked to do: the plan or the online controller, length, batch,
// optimizer, the emulated cluster, faults, checkpoints, places. Plain data with documented
// defaults; `training::prepare_job` fills it from a job file, programs may build it directly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/controller.hpp"
#include "model/api.hpp"
#include "planner/plan.hpp"
#include "planner/policy.hpp"
#include "planner/problem.hpp"
#include "sim/faults.hpp"
#include "sim/scenario.hpp"

namespace dynapar::training {

// Online re-planning: a controller actor learns speeds and link bandwidths from the step
// reports and decides the plan every `replan_every` steps and whenever a device joins or
// leaves. What it decides with is `core` (control::controller_config), paced by
// control::paced from this job's slots; the rest says which policy and where to start from.
struct control_settings {
  std::string policy = "joint_lyapunov";      // any planner policy by name
  std::shared_ptr<planner::policy> custom;    // or the caller's own (then `policy` is unused)
  int replan_every = 10;                      // steps a slot
  // A new plan's expected life in slots, over which its migration is weighed (control::paced).
  double plan_lifetime_slots = 2;
  std::optional<control::controller_snapshot> restore;  // resuming: start from a checkpoint's state
  // The profile (measured at start), every device that may take part (ids, memory, prices,
  // nodes; speeds are not read: a device joins with the speed its benchmark measured, and all
  // start unavailable until they join), the planner, the budgets and the estimates' knobs.
  // Hysteresis is off here, for programs that build their settings themselves; job files
  // turn it on by default (config::job, measured: docs/BENCHMARKS.md, "Hysteresis").
  control::controller_config core;
};

// A layer's checkpoint shard, written by a device that held it (model::save_shard).
struct shard_file {
  std::string path;     // absolute, as every process of the run sees it
  std::string sha256;   // of the file
};

// A consistent cut of the run after `step` steps: one copy of every layer with its optimizer
// state, and the controller's state. The sampler's position is the step (it is a function of
// seed and step). Written by the caller (docs/RELIABILITY.md: checkpoint files). The layers
// are either here (gathered) or in shards on disk, one per layer, written where they were
// held (train_callbacks::shard_dir); never both.
struct checkpoint {
  std::int64_t step = 0;                        // steps applied: the run resumes at this one
  std::vector<model::layer_copy> layers;
  std::vector<shard_file> shards;
  std::optional<control::controller_snapshot> controller;
  std::size_t num_layers() const { return shards.empty() ? layers.size() : shards.size(); }
};

struct train_settings {
  planner::plan plan;                // without a controller: the plan in force from step 0
  std::int64_t steps = 100;
  int batch = 64;
  std::uint64_t seed = 1;            // sampler seed (the model's is in the model)
  model::optimizer_config optimizer;
  int hash_every = 50;               // compare replica hashes every N steps (0: never)
  int scheduler_threads = 1;        // supervisors only: devices are detached threads
  double step_timeout_s = 120;
  // The validation set, evaluated where the layers are (forward-only tasks through the
  // groups' pipelines: the controller needs no layer for it) after each epoch
  // (train_callbacks::on_epoch) and at the end (train_outcome::test_metric). Null: none.
  // Not owned: it outlives the run.
  const data::dataset* test_set = nullptr;
  // Every device lost at once: how long to wait for replacements before the run fails.
  double rejoin_wait_s = 60;
  // Fault injection: after step `step`, nudge group `group`'s replica of layer `layer` (-1:
  // never), as a silent corruption the replica hashes must catch.
  struct {
    std::int64_t step = -1;
    int group = 0, layer = 0;
  } perturb;
  // Plans that take effect before the given steps (in step order).
  std::vector<std::pair<std::int64_t, planner::plan>> replans;
  // The emulated cluster: every device's true relative speed (1 = this machine), price,
  // links and availability, moved slot by slot by the dynamics (traces, events, random
  // processes; sim::world). Empty devices: every device of the plans at full speed, close.
  sim::scenario emulated;
  int slot_steps = 10;               // steps per slot of the dynamics
  // Profile of the model: prices the emulated cross-group sums (their ring time on the
  // emulated links); without one the sums take only their in-process time.
  std::optional<planner::model_profile> profile;
  // Profile-timed emulation: each forward and backward of a device lasts the profile's time /
  // its speed (actors::device_timing, sent to every device as it joins, also to devices in
  // node processes). Off: its CPU time / speed.
  bool profile_timed = false;
  // With a controller, its plans replace `plan` and `replans`.
  std::optional<control_settings> controller;
  // Every this many steps, a checkpoint goes to callbacks.on_checkpoint (0: never).
  int checkpoint_every = 0;
  // Pipelined control (docs/RUNTIME.md): step t+1's tasks go out right after step t's commit
  // when nothing is due between the two steps (a slot's start, a check, a fault, a member
  // change), so no device waits on the driver's round trip. Off: each step's tasks go out once
  // the step before is confirmed (`--serial-control`).
  bool pipelined_control = true;
  // What comes back of each trained layer at the end (train_outcome::final_layers and
  // final_hashes), one layer at a time: `whole`, with its optimizer state (what --verify
  // compares); `lean`, its parameters and buffers (the holder hashes the whole state and drops
  // the optimizer's: the gathering process holds the model once, no optimizer state); `hash`,
  // the whole state's hash alone (what layer_hashes.json and --verify-against need): nothing
  // of the model comes back.
  enum class final_form { whole, lean, hash };
  final_form final_layers = final_form::whole;
  // Resume from a checkpoint: steps [0, resume->step) count as applied; the layers are
  // placed by the first plan as they were saved, and the controller restarts from its state.
  std::optional<checkpoint> resume;
  // Faults to inject, in step order (sim::expand of the job's fault plan).
  std::vector<sim::fault> faults;
  // A step running longer fails; devices that then do not answer a probe are lost (a hung or
  // cut-off device). 0: automatic, 20 times the recent mean step time, at least 5 s, at most
  // step_timeout_s.
  double step_deadline_s = 0;
  // Where each device computes: device id -> "cuda:N", checked with model::check_place by
  // the caller; devices not listed compute on the CPU (docs/GPU.md).
  std::map<int, std::string> places;
  // The job's `exact`. False: devices let autograd add their micro-batches in place (one
  // gradient list per holder, no tree) and the holders' sums are added in group order
  // (docs/RUNTIME.md); `--verify` then reports the drift.
  bool exact = true;
  // Where a step's gradients are added (docs/RUNTIME.md). true: among each layer's holders
  // (model::peer_sum), node to node between processes, so no gradient passes through the
  // driver; false: the driver gathers every holder's partial sums and sends the sums back.
  // The same bits either way.
  bool peer_sum = false;
  // With peer_sum and exact: false: the holders add through Gloo (c10d's ring all-reduce),
  // meeting at this c10d TCPStore (HOST:PORT, model::start_gloo_store); empty: the holders'
  // own sum in holder order.
  std::string gloo_store;
  // With peer_sum: the layers with the same holders are added in buckets of at least this many
  // bytes of parameters, filled from the top layer down (0: one bucket per holder set), one
  // exchange each: the time model's buckets (planner_config::sum_bucket_bytes; docs/RUNTIME.md).
  std::size_t bucket_bytes = static_cast<std::size_t>(planner::planner_config{}.sum_bucket_bytes);
  // A holder's sums start when its stage finishes the step's backward, not when every group
  // has (the job's planner `overlap_sums`; docs/RUNTIME.md).
  bool overlap_sums = true;
  // Within-step dispatch (schedule/dispatch.hpp; docs/RUNTIME.md): single-device groups run
  // this part of their share as a probe, and the rest of their shares is handed out when the
  // first probe ends, by each device's pace in this step. 0: the plan's shares stand. Runs
  // over node processes dispatch too (protocol 21).
  double dispatch_probe = 0;
};

}  // namespace dynapar::training
