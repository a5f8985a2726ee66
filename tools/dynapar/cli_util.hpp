// Small helpers shared by subcommands: error printing and wall-clock timing (tools may read
// the clock; the libraries they call do not).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::cli {

// Prints "dynapar: <message>" to stderr and returns the exit code for it: 2 for bad input,
// 1 for work that failed.
int report(const error& e);
int report_exit(const error& e);  // the exit code report gives, without printing

// Runs `gnuplot SCRIPT` in `dir` (no shell between: the directory may be any name), its
// stderr into `log` there when one is named. Returns gnuplot's exit status; 127 when gnuplot
// is not installed.
int run_gnuplot(const std::string& dir, const std::string& script, const std::string& log = "");

// Waits for the process group led by `pid` (launch::spawn_self with own_group); kills the
// group when `stop` says so or at the deadline, and what is left of it once the leader exits.
// The leader's exit code (-1: killed by us).
int wait_run(pid_t pid, double timeout_s, const std::function<bool()>& stop);

// `dynapar --offload-optimizer DIR` (DYNAPAR_OFFLOAD_OPTIMIZER, which launch's nodes inherit):
// where this process's devices keep Adam's moments between steps; empty: in memory. An error
// names a DIR that is no directory or has no room for a file.
result<std::string> offload_dir_from_env();

// This process's CPU time (user and system, getrusage) and peak resident memory (peak_rss_mb).
struct process_usage {
  double cpu_s = 0;
  double max_rss_mb = 0;
};
process_usage own_usage();

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dynapar::cli
