#include "report/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dynapar::report {

progress_meter::progress_meter(std::int64_t total_steps, int batch, progress_config c)
    : total_(total_steps), batch_(batch), c_(c) {}

void progress_meter::step(std::int64_t step, double step_s, double loss, double elapsed_s) {
  const bool first = done_ == 0;
  done_ = step + 1;
  elapsed_s_ = elapsed_s;
  mean_step_s_ = first ? step_s : (1 - c_.smoothing) * mean_step_s_ + c_.smoothing * step_s;
  loss_ = first ? loss : (1 - c_.smoothing) * loss_ + c_.smoothing * loss;
  const std::int64_t pct_steps = std::max<std::int64_t>(1, total_ * c_.plain_every_pct / 100);
  due_ = first || done_ >= total_ || elapsed_s - last_plain_s_ >= c_.plain_every_s || done_ - last_plain_done_ >= pct_steps;
  if (due_) {
    last_plain_s_ = elapsed_s;
    last_plain_done_ = done_;
  }
}

bool progress_meter::plain_due() const { return due_; }

std::optional<double> progress_meter::eta_s() const {
  if (done_ == 0) return std::nullopt;
  return static_cast<double>(total_ - done_) * mean_step_s_;
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string progress_meter::line() const {
  char head[160];
  const auto eta = eta_s();
  std::snprintf(head, sizeof head, "step %lld/%lld  %.0f samples/s  loss %.4f  ETA %s", static_cast<long long>(done_),
                static_cast<long long>(total_), samples_per_s(), loss_, eta ? clock_text(*eta).c_str() : "?");
  std::string out = head;
  if (faults_ > 0) out += "  faults " + std::to_string(faults_);
  if (!plan_.empty()) out += "  plan " + plan_;
  return out;
}

}  // namespace dynapar::report
