// Small helpers shared by subcommands: error printing and wall-clock timing (tools may read
// the clock; the libraries they call do not).
#pragma once

#include <chrono>
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

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dynapar::cli
