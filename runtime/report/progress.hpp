// A training run's live status, as a person watching a terminal or a log wants it: steps
// done, samples/s, loss, ETA, the plan in force and faults so far. Pure: the caller feeds
// steps and the elapsed time (an injected clock), and prints what comes back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dynapar::report {

struct progress_config {
  double plain_every_s = 10;  // a plain line (not a terminal) at most this often ...
  int plain_every_pct = 10;   // ... or at each such share of the run, whichever comes first
  double smoothing = 0.1;     // weight of the newest step in the running means
};

class progress_meter {
 public:
  progress_meter(std::int64_t total_steps, int batch, progress_config c = {});
  // Step `step` (0-based) finished at `elapsed_s` after taking `step_s`, with `loss`.
  void step(std::int64_t step, double step_s, double loss, double elapsed_s);
  void plan(std::string brief) { plan_ = std::move(brief); }
  void fault() { ++faults_; }
  // The one-line status (no newline).
  std::string line() const;
  // A plain line is due (for logs, not a terminal): the first step, the last, and then by
  // plain_every_s or plain_every_pct.
  bool plain_due() const;
  // Seconds left at the recent pace (nullopt before the first step).
  std::optional<double> eta_s() const;
  double samples_per_s() const { return mean_step_s_ > 0 ? batch_ / mean_step_s_ : 0; }

 private:
  std::int64_t total_;
  int batch_;
  progress_config c_;
  std::int64_t done_ = 0;
  double mean_step_s_ = 0, loss_ = 0, elapsed_s_ = 0;
  double last_plain_s_ = -1;
  std::int64_t last_plain_done_ = 0;
  bool due_ = false;
  int faults_ = 0;
  std::string plan_;
};

// "1:02:03", "4:05", "0:07".
std::string clock_text(double seconds);

}  // namespace dynapar::report
