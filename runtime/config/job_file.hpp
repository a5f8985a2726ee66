// Training job YAML (docs/FORMATS.md, "Job files"): model, data, batch, length, optimizer,
// devices and policy, optionally an explicit plan. Errors name the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/lr_schedule.hpp"
#include "config/cluster_file.hpp"
#include "data/source.hpp"
#include "sim/faults.hpp"
#include "sim/scenario.hpp"

namespace dynapar::config {

struct job {
  std::string name;
  std::string model = "cnn";           // built-in model (model/api.hpp)
  // `data: KIND` (fashion_mnist, synthetic, fortunes) or `data: {kind: npy|tokens, path: DIR,
  // ...}` (docs/FORMATS.md, "Data"); synthetic_samples defaults to 6000, seed is the job's.
  data::source data;
  std::int64_t steps = 0;              // 0: from epochs
  double epochs = 1;
  std::string optimizer = "adam";      // or "adamw" or "sgd" (model::optimizer_config)
  double lr = 1e-3, momentum = 0.9, weight_decay = 0;  // adamw: weight_decay 0.01 unless given (PyTorch's)
  bool nesterov = false;
  lr_schedule schedule;                // optimizer.schedule (steps 0: the run's length)
  double label_smoothing = 0;          // loss: {kind: cross_entropy, label_smoothing: X}
  double clip_grad_norm = 0;           // optimizer.clip_grad_norm: the global norm's bound (0: none)
  bool bf16 = false;                   // precision: bf16 (model::optimizer_config::bf16); default fp32
  std::uint64_t seed = 1;
  std::string policy = "joint_lyapunov";
  int hash_every = 50;
  int threads = 1;                     // LibTorch intra-op threads (per process)
  int replan_every = 0;                // > 0: a controller actor re-plans every this many steps
  bool emulate = true;                 // devices run at their speed relative to the fastest (1 = this
                                       // machine), slower ones by sleeping (docs/RUNTIME.md)
  bool exact = true;                   // micro-batches of one size (micro_batch, default 16) and
                                       // shares its multiples: the run equals one device bit for bit
  double emulate_cores = 0;            // CPU cores the emulated devices may use together (0: this
                                       // machine's hardware threads); speeds scale down to fit
  std::string profile;                 // "": the model's profile is measured at the start; else a
                                       // profile JSON file (`dynapar profile MODEL --out FILE`)
  std::string emulate_compute = "cpu"; // "cpu": a device's work lasts its CPU time / speed;
                                       // "profile": the profile's time / speed
  cluster_file cluster;                // devices, links, planner settings (batch, schedule, ...)
  // Dynamics of the emulated cluster, in the scenario format (traces, links, events, random
  // processes) with slots of `replan_every` steps (10 without a controller).
  sim::scenario dynamics;
  std::optional<planner::plan> plan;   // explicit plan instead of the policy's
  // Faults to inject: at given steps and at seeded random ones (docs/RELIABILITY.md).
  sim::fault_plan faults;
  // A step that runs longer fails, and its silent devices are lost (0: automatic, 20 times
  // the recent mean step time and at least 5 s; docs/RELIABILITY.md).
  double step_deadline_s = 0;
  // `--verify` fails the command when the largest relative difference from one plain device
  // exceeds this (exact jobs: 0 unless given; others: 0.05 unless given).
  double verify_tolerance = 0;
  // The controller keeps its plan unless a new one gains more than the predictions' noise
  // plus its migration over two slots (docs/MODEL.md, "Hysteresis").
  bool hysteresis = true;   // measured through the runtime: docs/BENCHMARKS.md, "Hysteresis"
  // A plan change that measured slower than the plan before it is undone (docs/MODEL.md,
  // "Regret check and doubted drops").
  bool regret = true;
};

result<job> load_job_file(const std::string& path);
result<job> parse_job(const YAML::Node& doc, const std::string& name);

}  // namespace dynapar::config
