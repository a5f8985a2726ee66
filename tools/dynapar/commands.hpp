// Each subcommand registers itself on the app and sets `run` to what it does once parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace dynapar::cli {

// Exit codes: 0 success, 1 the work failed, 2 bad usage or bad input.
// exit_mismatch: --verify found the run differing from one plain device beyond the job's
// verify_tolerance.
inline constexpr int exit_ok = 0, exit_failed = 1, exit_usage = 2, exit_mismatch = 3;

using runner = std::function<int()>;

void add_plan(CLI::App& app, runner& run);
void add_bench(CLI::App& app, runner& run);
void add_bench_runtime(CLI::App& bench, runner& run);  // under `bench`
void add_bench_wire(CLI::App& bench, runner& run);     // under `bench`
void add_bench_sum(CLI::App& bench, runner& run);      // under `bench`
void add_bench_optimizer(CLI::App& bench, runner& run);  // under `bench`
void add_bench_control(CLI::App& bench, runner& run);    // under `bench`
void add_bench_data(CLI::App& bench, runner& run);       // under `bench`
void add_simulate(CLI::App& app, runner& run);
void add_train(CLI::App& app, runner& run);  // train and profile
void add_distributed(CLI::App& app, runner& run);  // controller, node, launch
void add_chaos(CLI::App& app, runner& run);
void add_report(CLI::App& app, runner& run);
void add_keygen(CLI::App& app, runner& run);

}  // namespace dynapar::cli
