// One attempt at a step as a pure state machine: the events the driver hears (a probe's
// progress, a stage's end, a group's end, a holder's sum held, a holder's update applied) go
// in with their times, and what to do comes out (the rests' tasks to send, the devices whose
// sums may start, whether the apply phase may begin, which holders have not confirmed it).
// What the attempt ran is then read once: the controller's measurement, the step record's
// stages, and what the probes foretold (schedule::pace_noise). No actors, no clock: the
// driver pumps it (actors/driver_step.cpp), keeps it until the next attempt (recovery reads
// whether it committed and who confirmed), and the tests feed it synthetic times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "control/confirmations.hpp"
#include "control/measurement.hpp"
#include "schedule/dispatch.hpp"
#include "step/layout.hpp"

namespace dynapar::step {

struct attempt_options {
  double work_over_fwd = 3;  // a sample's forward and backward over its forward (the profile's)
  bool overlap_sums = true;  // a device's sums start at its stage's end, not every group's
};

class attempt {
 public:
  // Attempt `tag` at plan `p` laid out as `l`; the probing devices' priors and the trust in
  // probes from `paces`.
  attempt(std::int64_t tag, planner::plan p, layout l, const schedule::pace_noise& paces, attempt_options o);

  const layout& shape() const { return l_; }
  // A task of group `g` went out, `now` seconds after the step started.
  void sent(std::size_t g, double now);
  // A probe's progress on `device`: kind 1, its first forward ended (`compute_s` its time);
  // kind 2, the probe ended (`compute_s` its forward and backward). The first probe to end
  // decides the dispatch: then the rests' tasks come out (rest_slices), else none.
  std::vector<slice> interim(int device, int kind, double compute_s, double now);
  // The same progress noted without deciding, and the decision at `now` (the rests' tasks;
  // none once decided): the simulator notes every probe that ended by the first one's end,
  // ties included, then decides. interim() is note() and, at a probe's end, decide().
  bool note(int device, int kind, double compute_s, double now);  // false: not a probing device
  std::vector<slice> decide(double now);
  // Each group's rest of the pool once dispatched (-1: not, or the group takes no part).
  const std::vector<int>& rests() const { return rest_; }
  // A stage's end on `device`: the devices whose sums may start now.
  std::vector<int> stage_done(int device, double now);
  // A group's end (its loss sum, its pipeline's time, its stages): the devices whose sums may
  // start now (without overlap, every reported one once the last group ended).
  std::vector<int> group_done(double loss_sum, double time_s, const std::vector<control::stage_figures>& stages, double now);

  // A holder's sums are held (`bytes_in` received from its peers for them).
  void sum_held(int device, double bytes_in);
  // The apply phase may begin: every pipeline ended and every sum is held (`sums_done`: the
  // reduction's word), and the attempt has not committed yet.
  bool may_commit(bool sums_done) const { return pipelines_done() && sums_done && !committed_; }
  // The apply phase begins: from here every live holder applies this attempt, so a failure
  // leaves the survivors one step further. `buckets`: layers summed and applied together.
  void commit(std::map<int, std::vector<int>> buckets);
  // A holder applied this attempt's sum to `layer` (and the rest of its bucket): false when it
  // is another attempt's (`tag`) or repeats one already counted.
  bool applied(int device, std::int64_t tag, int layer);
  bool committed() const { return committed_; }
  // Holders (layer -> devices) still in the run that have not confirmed the apply phase.
  std::set<int> unconfirmed(const std::map<int, std::vector<int>>& holders, const std::function<bool(int)>& in_run) const;
  const std::map<int, double>& sum_bytes() const { return sum_bytes_; }  // by holder, received

  bool pipelines_done() const { return groups_done_ == p_.groups.size(); }
  // Every stage of the plan has ended: every sum is under way.
  bool all_stages_done() const { return ready_s_.size() == devices_; }
  double pipelines_s() const { return pipelines_s_; }  // when the last group ended
  double pipeline_s() const { return pipeline_s_; }    // the slowest group's own time
  double loss_sum() const { return loss_sum_; }
  // Each group's stages' ends, in pipeline order (0: not heard), for the sums' emulation.
  std::vector<std::vector<double>> ready_by_stage() const;
  // What the controller learns: each stage of the plan with its compute time, a dispatched
  // device with what it ran in all; and every link's traffic.
  control::measurement measure() const;
  std::vector<control::stage_figures> stage_times() const;
  // What the probes and priors foretold of the rests, for the next steps' trust.
  void teach(schedule::pace_noise& paces) const;

 private:
  int taker(int device) const;  // the probing group of a device (-1: none)
  int ran(int device) const;    // the samples it ran: its probe and rest, or its group's share

  std::int64_t tag_;
  planner::plan p_;
  layout l_;
  attempt_options o_;
  double trust_ = 1;
  std::size_t devices_ = 0;                      // in the plan
  std::vector<schedule::probe_progress> progress_;
  std::vector<int> rest_;                        // of the pool, by group, once dispatched (-1: not)
  std::map<int, double> ready_s_;                // by device: its stage's end
  std::size_t groups_done_ = 0;
  double loss_sum_ = 0, pipeline_s_ = 0, pipelines_s_ = 0;
  std::vector<control::stage_figures> stages_;  // in the order the groups reported
  std::map<int, double> sum_bytes_;
  bool committed_ = false;
  control::apply_confirmations confirmed_;
};

}  // namespace dynapar::step
