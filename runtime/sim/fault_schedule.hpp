// A run's fault plan as it unfolds (pure): which faults strike at a step, the kills and pauses
// that wait for a moment (sim::fault_moment) and are taken when it comes, the first
// placement's kill armed before the first step, what is still pending before a step (the run
// loop's facts), and what never landed. Owns the faults' randomness (where in a window a fault
// lands, which device it hits), seeded, so one seed gives one experiment. The driver strikes
// (actors/driver_faults.cpp); the tests feed it steps and moments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/faults.hpp"

namespace dynapar::sim {

class fault_schedule {
 public:
  fault_schedule() = default;
  // `plan` sorted by step (sim::expand); a run resumed at `start` skips the faults before it.
  fault_schedule(std::vector<fault> plan, std::int64_t start, std::uint64_t seed);

  struct due_faults {
    std::vector<fault> now;       // strike within step t
    std::vector<fault> injected;  // of `extra` (dynapar inject), strike within step t
    std::vector<fault> armed;     // armed now: they wait for their moment
  };
  // The faults of step t, and `extra` ones injected now.
  due_faults due(std::int64_t t, const std::vector<fault>& extra = {});
  // The armed faults waiting for `m`, taken (at most `most`).
  std::vector<fault> take(fault_moment m, std::size_t most = SIZE_MAX);
  bool waiting(fault_moment m) const;
  // A fault due at or before step `next`, or one armed for a moment that a serial step
  // brings (every moment but `early`, which needs the step to start early).
  bool pending(std::int64_t next) const;
  const std::vector<fault>& armed() const { return armed_; }  // at the end: never landed

  // The faults' randomness: microseconds into a window of `window_s`; one of `n`.
  int after_us(double window_s);
  std::size_t pick(std::size_t n);

 private:
  std::vector<fault> plan_;
  std::size_t next_ = 0;
  std::int64_t start_ = 0;
  std::vector<fault> armed_;
  std::mt19937_64 rng_;
};

}  // namespace dynapar::sim
