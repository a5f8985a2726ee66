// Within-step dispatch (docs/MODEL.md, "Within-step dispatch"): single-device groups run a
// probe, the first part of their share, and the rest of their shares is handed out once the
// first probe ends, by how fast each device is in this step (its probe, weighed against its
// last step as far as probes have proved noisy), not by the estimates the plan was made
// with. A device slowed by a load burst in this very step then takes less, and the others
// more, instead of holding the step up. Each device's rest is one run of micro-batches after
// its probe, so its last micro-batch stays large and its sums still hide under its backward.
// Pure: the simulator and the training driver decide with the same functions.
#pragma once

#include <map>
#include <vector>

namespace dynapar::schedule {

// What the dispatcher has heard from one device's probe when it decides, `now` seconds after
// the step started.
struct probe_progress {
  double started_s = 0;       // its task went out at
  int samples = 0;            // in the probe
  int first_samples = 0;      // in its first micro-batch
  double forward_s = -1;      // that micro-batch's forward took this long (-1: not yet done)
  double done_s = -1;         // the probe ended at (-1: not yet)
  double compute_s = 0;       // with done_s: the probe's forward and backward time
  double prior_s = -1;        // its seconds a sample in its last step's rest (-1: none)
};

// One device's prospects for the rest: it is free at `free_s` and takes `per_sample_s` a sample.
struct prospect {
  double free_s = 0;
  double per_sample_s = 0;
};

// Its pace in this step: from the finished probe; else from its first forward (a sample's
// forward and backward take `work_over_fwd` times its forward, the profile's ratio). What the
// probe measured is weighed against the prior by `trust` (pace_noise), geometrically: 1, the
// probe alone; 0, the prior alone. Not heard from: at least what its first forward, begun
// at `started_s` and not ended by `now`, shows, and at least its prior.
prospect prospect_of(const probe_progress& p, double now, double work_over_fwd, double trust = 1);

// Each device's pace a sample in its last rest (its prior), and how far a probe's pace and
// the prior each miss the pace of the rest that follows, learnt over the run: log errors'
// mean squares, smoothed. A probe is
// a micro-batch or two, and where the machine is noisy (several emulated devices starting
// a step at once on two cores) it misses by more than the last step did; where speeds jump
// from step to step (load bursts) the prior misses more. The trust in the probe is the
// prior's share of the two: the estimate of least variance for two independent errors.
class pace_noise {
 public:
  // One device's step: its probe's pace and its rest's, which becomes its prior.
  void observe(int device, double probe_s, double rest_s);
  // Its prior (-1: none yet).
  double prior(int device) const;
  // 1 until both errors have been seen.
  double trust() const;

 private:
  std::map<int, double> prior_;
  double probe_var_ = -1, prior_var_ = -1;
};

// Splits `units` units of `unit` samples among the devices, one by one to whichever would
// finish it first: the least makespan for such linear prospects (each unit's finish is the
// next of an increasing sequence per device, and the units go to the smallest ones).
std::vector<int> dispatch_units(const std::vector<prospect>& devices, int units, int unit);

// The pool's `samples` in whole units (the last may be short) by dispatch_units, as samples
// by device.
std::vector<int> dispatch_samples(const std::vector<prospect>& devices, int samples, int unit);

// How many samples of a share of `share` a probe takes: `fraction` of it, in whole units,
// at least one unit and one unit short of the share (0: the group takes no part).
int probe_samples(int share, double fraction, int unit);
// Each group's probe (probe_samples of `shares`, 0 where a group may not take part), or none
// at all unless two groups take part: one alone has nobody to hand work to.
std::vector<int> probes(const std::vector<int>& shares, double fraction, int unit);

}  // namespace dynapar::schedule
