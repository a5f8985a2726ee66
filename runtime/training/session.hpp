// A run composed around its trainer (issue 72): what `dynapar train`, `controller` and
// `launch` do once their flags are parsed, for a library user to drive too. The session
// writes the run's outputs (metrics.jsonl, plans.jsonl, summary.json, the layers' hashes:
// docs/RUNTIME.md), resumes from a checkpoint and writes checkpoints, checks --verify-against
// before the run, and after it saves the model, trains --compare's policies and --verify's
// plain device. The trainer says where the devices live (in this process: actors::train);
// the watch sees the run as it goes (a progress line, a dashboard).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/compare.hpp"
#include "training/prepare.hpp"
#include "training/verify.hpp"

namespace dynapar::training {

struct session_options {
  std::string out = "out/train";  // the run's directory (created)
  bool verify = false;            // train the job on one plain device too, and compare
  std::string verify_against;     // another run's out: its layers must be this run's bits
  std::string save_model;         // a TorchScript copy of the trained model (.pt)
  std::string checkpoint_dir;     // empty: rollback points only, in out/rollback
  int checkpoint_every = 0;       // steps between checkpoints; 0: 50
  std::string resume;             // continue from the newest complete checkpoint here
  int keep_checkpoints = 0;       // keep the newest K (0: all)
  std::vector<std::string> compare;     // after the run, these policies train ...
  std::int64_t compare_steps = 100;     // ... this many steps each, on the same devices
  std::string hysteresis;         // "on" or "off" overrides the job's; empty: the job's
  bool pipelined_control = true;  // a step may go out with the commit of the one before
  std::string offload_dir;        // Adam's moments in host files here; empty: in memory
};

// Trains the prepared job with these callbacks: in this process or over nodes.
using session_trainer = std::function<result<train_outcome>(prepared_job&, const train_callbacks&)>;

// What the session tells its caller as the run goes, besides the files it writes; each
// optional. The clock and the process's usage are the caller's (the libraries read none).
struct session_watch {
  std::function<void(const plan_record&)> on_plan;
  std::function<void(const step_record&)> on_step;
  std::function<void(std::int64_t epoch, double metric, double train_loss)> on_epoch;
  std::function<void(const fault_record&)> on_fault;
  std::function<double()> wall_s;            // seconds since the run began
  std::function<double()> cpu_s;             // the process's CPU seconds so far (each step's)
  std::function<nlohmann::json()> process;   // summary.json's "process" (CPU, memory)
};

struct session_outcome {
  nlohmann::json summary;              // as written to out/summary.json
  reference_check check;               // --verify's (with verify)
  std::vector<int> layers_differing;   // --verify-against's (with verify_against)
  std::size_t layers = 0;              // layers hashed
  std::vector<std::string> unwritten;  // checkpoints that could not be written
};

// Mistakes in the options for this job (a --compare or --hysteresis without a controller,
// --compare with --resume, an unknown policy, a GPU device with offloaded state), before
// anything runs.
status check_session(const prepared_job& prep, const session_options& o);

// The run. `compare_with` trains other settings in this process (--compare); it may be null
// without compare. A run that failed writes summary.json with its error and returns it.
result<session_outcome> run_session(prepared_job& prep, const session_options& o, const session_trainer& train,
                                    const train_fn& compare_with, const session_watch& watch = {});

// summary.json of a run that stopped or could not start: the job and why.
void write_error_summary(const std::string& out, const std::string& job, const std::string& why);

}  // namespace dynapar::training
