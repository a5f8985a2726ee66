// The run's figures as its steps commit, and the outcome's averages made from them (issue 72:
// the driver's tallies as pure code, tested on hand-made steps).
#pragma once

#include <cstdint>
#include <vector>

#include "control/measurement.hpp"
#include "training/records.hpp"

namespace dynapar::training {

class run_tally {
 public:
  // Step rec.step committed with record `rec` (its time, cost, controller wait and stages set)
  // and measurement `m` (energy by device, link bytes); `replanned`: its plan changed before it;
  // `incidents`: the run's recoveries and step retries so far. Adds to `out`'s sums by device
  // and sets its messages a step. A steady step (not the run's first, its plan unchanged, no
  // incident since the step before) counts toward the controller's wait share.
  void committed(const step_record& rec, const control::measurement& m, bool replanned, int incidents, train_outcome& out);
  // `out`'s averages over the steps this run executed (out.steps - out.resumed_from) of `batch`
  // samples each, and over `recovery_s`, each recovery's seconds.
  void finish(int batch, const std::vector<double>& recovery_s, train_outcome& out) const;

 private:
  double time_ = 0, cost_ = 0;
  double steady_wait_ = 0, steady_time_ = 0;  // controller waits and step times of steady steps
  int incidents_ = 0;                         // as of the last step committed
};

}  // namespace dynapar::training
