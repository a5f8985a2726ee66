// An emulated device's speed, as the device actor keeps it: work it did at this machine's
// speed is stretched to what a device of relative speed s would take, by sleeping. No CAF.
#pragma once

#include <chrono>
#include <vector>

#include "planner/profile.hpp"

namespace dynapar::actors {

class device_clock {
 public:
  using clock = std::chrono::steady_clock;
  explicit device_clock(double speed) { set_speed(speed); }

  void set_speed(double speed);  // clamped to [1e-3, 1]: no emulated device beats the machine
  double speed() const { return speed_; }

  // Profile-timed emulation: the payload of device_timing (fwd_s, bwd_s, fixed_s, update_s of
  // each layer); empty or malformed: CPU-timed again.
  void set_timing(const std::vector<double>& per_layer);
  bool profile_timed() const { return !timing_.empty(); }
  // The profile's seconds for layers [lo, hi)'s forward or backward of `rows` samples (-1:
  // not profile-timed); the per-micro-batch fixed part is split evenly between the two.
  double reference_s(int lo, int hi, bool forward, double rows) const;
  // The profile's seconds for one optimizer step of `layer` (-1: not profile-timed).
  double update_s(int layer) const;

  // A step or probe begins: what earlier sleeps overslept no longer counts.
  void new_step() { overslept_ = 0; }

  // Work started at (t0, cpu0): the emulated device takes cpu / speed for it (or, profile-
  // timed, `reference_s` / speed), so the device sleeps whatever of that the wall clock has
  // not yet spent. Dilating the CPU time rather than the wall time keeps waits for a core
  // (other devices, the driver) out of the emulated device's speed.
  struct work_start {
    clock::time_point t0 = clock::now();
    double cpu0 = thread_cpu_s();
  };
  // Sleeps until the work's emulated end; returns the work's wall seconds.
  double finish(const work_start& w, double reference_s = -1);

  // CPU seconds of this thread: the work itself, whatever else the machine runs meanwhile.
  static double thread_cpu_s();

 private:
  double speed_ = 1;
  // Seconds the emulated work of this step is late so far: a sleeping thread wakes up late
  // (timer slack, a wait for a core), and work waits for a core while several emulated
  // devices compute at once; a real device would pay neither, so later sleeps of the step
  // are shortened by it.
  double overslept_ = 0;
  std::vector<planner::layer_profile> timing_;
};

// The payload of (timing_atom, ...) for a profile: fwd_s, bwd_s, fixed_s, update_s of each
// layer (docs/RUNTIME.md, profile-timed emulation).
std::vector<double> device_timing(const planner::model_profile& profile);

}  // namespace dynapar::actors
