#include "actors/device_clock.hpp"

#include <time.h>

#include <algorithm>
#include <thread>

namespace dynapar::actors {

void device_clock::set_speed(double speed) { speed_ = std::clamp(speed, 1e-3, 1.0); }

void device_clock::set_timing(const std::vector<double>& per_layer) {
  timing_.clear();
  for (std::size_t i = 0; per_layer.size() % 4 == 0 && i < per_layer.size(); i += 4) {
    planner::layer_profile l;
    l.fwd_s = per_layer[i], l.bwd_s = per_layer[i + 1], l.fixed_s = per_layer[i + 2], l.update_s = per_layer[i + 3];
    timing_.push_back(l);
  }
}

double device_clock::reference_s(int lo, int hi, bool forward, double rows) const {
  if (timing_.empty()) return -1;
  double t = 0;
  for (int l = std::max(0, lo); l < hi && l < static_cast<int>(timing_.size()); ++l)
    t += rows * (forward ? timing_[l].fwd_s : timing_[l].bwd_s) + 0.5 * timing_[l].fixed_s;
  return t;
}

double device_clock::update_s(int layer) const {
  return layer >= 0 && layer < static_cast<int>(timing_.size()) ? timing_[layer].update_s : -1;
}

double device_clock::finish(const work_start& w, double reference_s) {
  const auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const double cpu = reference_s >= 0 ? reference_s : thread_cpu_s() - w.cpu0;
  const double target = cpu / speed_, worked = since(w.t0);
  const double left = target - worked - overslept_;
  if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
  const double took = since(w.t0);
  // Late by whatever reason: the emulation's own sleep woke late, or the work itself waited
  // for a core (several emulated devices computing at once on few cores). Either is this
  // machine's, not the emulated device's, so the step's later sleeps make it up where they can.
  overslept_ = std::max(0.0, overslept_ + took - target);
  return took;
}

double device_clock::thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<double> device_timing(const planner::model_profile& profile) {
  std::vector<double> out;
  for (const auto& l : profile.layers) out.insert(out.end(), {l.fwd_s, l.bwd_s, l.fixed_s, l.update_s});
  return out;
}

}  // namespace dynapar::actors
