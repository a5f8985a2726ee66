// A step's layout: which samples each group runs, in which tasks, and how its micro-batches
// are numbered. One rule for the training driver and the simulator (issue 47).
//
// Every group gets a contiguous slice of the step's samples, cut into micro-batches numbered
// in sample order (the exact sum's leaves). With within-step dispatch (docs/MODEL.md), the
// single-device groups first take their probes, then the other groups their shares, and the
// rest of the samples is a pool handed out, in units, when the first probe ends. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/plan.hpp"

namespace dynapar::step {

struct layout_options {
  bool dispatch = false;  // within-step dispatch may run this step
  double probe = 0;       // a probe's fraction of its group's share (schedule::probe_samples)
  // Exact sums: the pool's unit is a whole micro-batch, so that every sample keeps its leaf of
  // the fixed-order tree; only groups of that micro-batch size take part. Otherwise the unit
  // is one sample.
  bool exact = false;
};

// One task: samples [lo, hi) of the step's, for group `group`, its micro-batches numbered from
// `first_micro`. `more`: a probe, whose rest follows.
struct slice {
  std::size_t group = 0;
  int lo = 0, hi = 0;
  std::int64_t first_micro = 0;
  bool more = false;
};

struct layout {
  int unit = 1;                   // of the pool, in samples
  std::vector<int> probe;         // by group: its probe's samples (0: it runs its share as planned)
  std::vector<slice> opening;     // the tasks sent when the step starts, in this order
  int pool = 0, pool_at = 0;      // the pool's samples, and where it starts among the step's
  std::int64_t pool_micro = 0;    // its first micro-batch's number
  std::int64_t micro_batches = 0; // of the whole step
  bool probes(std::size_t g) const { return probe[g] > 0; }
};

// The layout of plan `p`'s step of `batch` samples.
layout make_layout(const planner::plan& p, int batch, const layout_options& o);

// The rests' tasks, once dispatch gave each probing group `rest[g]` samples of the pool (-1:
// a group that does not probe): in group order, each after the previous ones in the pool. A
// rest of 0 is still a task: it tells the device that its probe was all.
std::vector<slice> rest_slices(const layout& l, const std::vector<int>& rest);

// Micro-batches a dispatched group ran: its probe's and its rest's, each cut by `micro_batch`.
int dispatched_micro_batches(int probe, int rest, int micro_batch);

}  // namespace dynapar::step
