// The time and memory model of docs/MODEL.md ("Plan and time"), on device indices: per-group pipeline
// timing, memory caps, segment-wise cross-group gradient sums and migration. Pure.
#pragma once

#include <utility>
#include <vector>

#include "planner/problem.hpp"

namespace dynapar::planner {

// Per micro-batch of x samples: stage compute (fwd + bwd) and a boundary's round trip
// (activation forward, its gradient back).
double stage_time(const problem& p, int dev, int lo, int hi, double x);
double link_time(const problem& p, int a, int b, int cut, double x);

// Activation copies a stage keeps for backward: GPipe keeps all micro-batches (so memory
// caps the share), 1F1B keeps n - j (1F1B-deep 2 (n - j - 1) + 1; so memory caps the
// micro-batch), one stage keeps one.
bool stage_fits(const problem& p, int dev, int lo, int hi, int u, int inflight);

struct group_shape {
  std::vector<int> devices;      // device indices, pipeline order
  std::vector<int> splits;       // n + 1 cut points
  int micro_batch = 1;
  std::vector<double> stage_s;   // per micro-batch of micro_batch samples
  std::vector<double> link_s;    // per micro-batch, n - 1 boundaries
  double bottleneck_s = 0;       // R: the slowest stage or link
  double fill_s = 0;             // S: one micro-batch through every stage and link
  int bottleneck = 0;            // j < n: stage j; n <= j < 2n: link j - n; 2n + i: a 1F1B loop from stage i
  double cap = unlimited;        // largest share memory allows
  bool feasible = false;
  int stages() const { return static_cast<int>(devices.size()); }
  // Affine model used by water-filling: time(b) ~= alpha * b + beta for b >= micro_batch.
  double alpha() const { return bottleneck_s / micro_batch; }
  double beta() const { return fill_s - bottleneck_s; }
};

// Fills timing and memory fields for given devices, splits and micro-batch.
group_shape make_shape(const problem& p, std::vector<int> devices, std::vector<int> splits, int u);

// Flush time of one step of `share` samples: (M - 1) R + S with M = ceil(share / u), the last
// micro-batch at its own size when smaller; one micro-batch of `share` samples when share <= u.
double group_time(const problem& p, const group_shape& g, double share);

// Busy (computing) seconds of stage j for a share; drives energy.
double stage_busy(const problem& p, const group_shape& g, int j, double share);

// Cross-group gradient sums: split points of all groups cut the chain into segments; each
// segment is ring-all-reduced over its holders (ordered by device index), with
// planner_config::overlap_sums in buckets of its layers (each an entry below).
struct sum_segment {
  int lo = 0, hi = 0;                         // layers
  std::vector<std::pair<int, int>> holders;   // (group, stage), one per active group
  std::vector<int> devices;                   // the holders' device indices
  double seconds = 0;                         // the ring over them
  // Per holder: how long before its stage finishes the step's backward the segment's
  // gradients are final. Backward runs down the stage, so a segment above the stage's first
  // layer is done once the last micro-batch's backward has passed it: the rest is the
  // backward of the stage's layers below it.
  std::vector<double> lead_s;
};
// `shares[g]` (active group g's samples) sizes the last micro-batch behind each lead; without
// shares every lead is 0 (stage level).
std::vector<sum_segment> sum_segments(const problem& p, const std::vector<const group_shape*>& active,
                                      const std::vector<double>& shares = {});

// When the last sum ends, in seconds from the step's start. A segment's sum starts once each
// of its holders has its gradients (`ready[group][stage]`, when the stage finishes the step's
// backward, from the step's start, less the segment's lead) and has summed its earlier
// segments; each device sums its segments one at a time, in the order
// they become ready (the last layers first on ties, as backward frees them). With every
// ready time 0 this is the sums back to back: the slowest device's total. A device's
// partners may still be busy with other segments; that coupling is not modelled.
double sums_end(const std::vector<sum_segment>& segs, const std::vector<std::vector<double>>& ready);

// The sums back to back after the pipelines: the slowest device's total (sums_end with
// every ready time 0). Groups with zero share take no part.
double sync_time(const problem& p, const std::vector<const group_shape*>& active);

// When each stage of a group finishes the step's backward, from the step's start, given the
// group's flush time `time_s` for `share` samples: stage 0 finishes last, at time_s; stage j
// earlier by the last micro-batch's backward through stages 0..j-1 and the gradient's way
// over their links.
std::vector<double> stage_ready(const problem& p, const group_shape& g, double share, double time_s);

// The part of the sums that the pipelines (ending at `compute`) do not hide: overlapped with
// backward (planner_config::overlap_sums), each starts as its holders' stages are `ready`;
// otherwise they all wait for the slowest group.
double exposed_sync(const problem& p, const std::vector<sum_segment>& segs, const std::vector<std::vector<double>>& ready,
                    double compute);
// The same with the ready times stage_ready predicts; `time_s[g]` is active group g's flush
// time for `shares[g]` samples.
double exposed_sync(const problem& p, const std::vector<const group_shape*>& active, const std::vector<double>& shares,
                    const std::vector<double>& time_s);

// Every holder's optimizer step after the sums: the slowest device's update of the layers it
// holds (all groups', each device in one group).
double update_time(const problem& p, const std::vector<const group_shape*>& active);

// What each device held in the previous plan, for migration cost.
class holdings {
 public:
  holdings() = default;
  holdings(const problem& p, const plan* previous);  // ids of departed devices are ignored
  // Seconds and bytes to bring layers [lo, hi) to dev: from the best-connected old holder
  // that is still available, else from the checkpoint.
  std::pair<double, double> bring(const problem& p, int dev, int lo, int hi) const;

 private:
  std::vector<std::pair<int, int>> range_;       // per device index: layers held [lo, hi)
  std::vector<std::vector<int>> by_layer_;       // per layer: available holders
};

}  // namespace dynapar::planner
