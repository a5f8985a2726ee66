// What `dynapar train`, `dynapar controller` and `dynapar launch` share: a job trained and
// written out (metrics.jsonl, plans.jsonl, summary.json, --verify). They differ only in where
// the devices live: `how` trains the prepared job (null: every device in this process).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "training/prepare.hpp"
#include "training/records.hpp"

namespace dynapar::cli {

struct train_options {
  std::string job, out = "out/train";
  bool verify = false;
  std::string verify_against;   // another run's --out: its layers must be this run's bits (training/verify.hpp)
  std::string save_model;       // a TorchScript model's trained copy (--save-model)
  std::int64_t steps = 0;
  std::string place;            // non-empty: every device computes there (docs/GPU.md)
  std::string hysteresis;       // "on" or "off" overrides the job's; empty: the job's
  std::string checkpoint_dir;   // write checkpoints here (docs/RELIABILITY.md)
  int checkpoint_every = 0;     // steps between checkpoints (0: none; default 50 with a dir)
  std::string resume;           // continue from the newest complete checkpoint in this directory
  int keep_checkpoints = 0;     // keep the newest K checkpoints (0: all)
  // Side by side (train only): after the run, these policies train the job's first
  // compare_steps steps on the same emulated devices, and the summary compares step times.
  std::vector<std::string> compare;
  std::int64_t compare_steps = 100;
  // The live dashboard (runtime/dashboard): off unless a port is given (0: any free port,
  // written to OUT/dashboard.url).
  int dashboard_port = -1;
  std::string dashboard_host = "127.0.0.1";
  std::string dashboard_token;  // required beyond loopback
  bool serial_control = false;  // --serial-control: no step starts before the one before is confirmed
};

using train_fn = std::function<result<training::train_outcome>(training::prepared_job&, const training::train_callbacks&)>;

int train_main(const train_options& o, const train_fn& how);
// --verify, --verify-against.
void add_verify_flags(CLI::App* sub, train_options& o);
// --checkpoint-dir, --checkpoint-every, --keep-checkpoints, --resume.
void add_checkpoint_flags(CLI::App* sub, train_options& o);
// --dashboard PORT, --dashboard-host.
void add_dashboard_flags(CLI::App* sub, train_options& o);
// --serial-control.
void add_step_flags(CLI::App* sub, train_options& o);

}  // namespace dynapar::cli
