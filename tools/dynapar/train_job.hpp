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
#include "training/session.hpp"

namespace dynapar::cli {

struct train_options {
  std::string job;
  std::int64_t steps = 0;       // override the job's length (0: the job's)
  std::string place;            // non-empty: every device computes there (docs/GPU.md)
  training::session_options run;  // outputs, checkpoints, --verify, --compare (training/session.hpp)
  // The live dashboard (runtime/dashboard): off unless a port is given (0: any free port,
  // written to OUT/dashboard.url).
  int dashboard_port = -1;
  std::string dashboard_host = "127.0.0.1";
  std::string dashboard_token;  // required beyond loopback
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
