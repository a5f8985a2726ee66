// The cluster a training run emulates on this machine (docs/RUNTIME.md): the scenario's world
// slot by slot (true speeds, links, prices, power, joins and leaves, failures) plus the
// slow-downs that faults inject. The driver asks it what each device and link really is; the
// controller never does (it learns from measurements). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "planner/plan.hpp"
#include "planner/time_model.hpp"
#include "sim/world.hpp"

namespace dynapar::sim {

class emulated_cluster {
 public:
  explicit emulated_cluster(scenario s);
  emulated_cluster(const emulated_cluster&) = delete;  // world_ and links_ point into it
  emulated_cluster& operator=(const emulated_cluster&) = delete;

  // Moves to `slot` (0, 1, 2, ... in order; a resumed run may start later).
  void enter_slot(int slot);
  const planner::cluster_state& truth() const { return truth_; }
  // Devices that fail during `slot`, unannounced.
  std::vector<int> failing(int slot) const { return world_.failing(slot); }
  int index_of(int id) const { return links_->index_of(id); }
  // The link a -> b this slot: bandwidth (bytes/s) and latency (s); {inf, 0} for a device the
  // scenario does not know.
  std::pair<double, double> link(int a, int b) const;

  // A device's true relative speed: the world's, times an injected slow-down, within
  // [1e-3, 1] (no emulated device beats this machine).
  double true_speed(int id) const;
  // Injected: `id` runs at `factor` of its speed until step `until`.
  void slow_down(int id, double factor, std::int64_t until) { slow_[id] = {factor, until}; }
  void forget(int id) { slow_.erase(id); }  // a lost device's slow-down dies with it
  // The slow-downs over at step t (removed): those devices are back at their world speed.
  std::vector<int> slow_downs_over(std::int64_t t);
  // Whether one is over at step t (nothing removed).
  bool slow_down_over(std::int64_t t) const {
    for (const auto& [id, s] : slow_)
      if (t >= s.until) return true;
    return false;
  }

  // A device's price a second and its power (0 for an unknown device): control::price's.
  double price_per_s(int id) const;
  double power_w(int id) const;
  // The cross-group sums of plan `p` on this slot's true links (planner::sum_segments, the
  // holders as (group, stage) of the plan, the leads from its shares): what each would take
  // on the emulated cluster.
  // None with one group, or when the plan names a device the scenario does not know.
  // `overlap`: in buckets with their leads (planner_config::overlap_sums), else a ring a segment.
  std::vector<planner::sum_segment> sums(const planner::model_profile& m, int batch, const planner::plan& p,
                                         bool overlap = true) const;

 private:
  struct slowdown {
    double factor;
    std::int64_t until;  // the first step at full speed again
  };
  scenario scenario_;
  world world_;
  planner::cluster_state truth_;
  std::unique_ptr<planner::link_table> links_;  // over truth_
  std::map<int, slowdown> slow_;
};

}  // namespace dynapar::sim
