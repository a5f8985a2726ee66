// Small helpers shared by subcommands: error printing and wall-clock timing (tools may read
// the clock; the libraries they call do not).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::cli {

// Prints "dynapar: <message>" to stderr and returns the exit code for it: 2 for bad input,
// 1 for work that failed.
int report(const error& e);

// Starts this same binary with `args` (argv[0] first) as a child process; returns its pid.
// The child runs a fresh dynapar (worker processes: launch's nodes, bench sum's workers).
// `log`: its stdout and stderr appended there ("": inherited). `own_group`: it leads a
// process group of its own, so that kill(-pid) also reaches the processes it starts.
pid_t spawn_self(std::vector<std::string> args, const std::string& log = "", bool own_group = false);

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dynapar::cli
