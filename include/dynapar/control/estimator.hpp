// What a policy knows: speeds and link bandwidths estimated online from measured stage and
// transfer times of past steps, never from configured speeds or the world's future. Pure.
#pragma once

#include <vector>

#include "control/measurement.hpp"
#include "planner/problem.hpp"

namespace dynapar::control {

class estimator {
 public:
  // Starts from the nominal specs devices announce when they join.
  estimator(const planner::cluster_state& nominal, const planner::model_profile& model, double smoothing);
  // Folds in one step's measurements; `announced` gives the devices' nodes, racks, NICs and
  // link latencies (the cluster as announced, not measured).
  void observe(const measurement& step, const planner::problem& announced);
  // A device (re)joins announcing a measured speed: the estimate restarts there.
  void announce(int device_id, double speed);
  // A slot ends: each device that no step of it measured relaxes toward the speed it
  // announced (or the nominal one), halving the log of their ratio every
  // `unseen_half_life_slots`, and its next measurement replaces the guess. Without
  // this a device dropped from the plan while a burst slowed it kept its burst speed for
  // ever, as nothing measures it again, and was never chosen again however fast it became
  // (docs/MODEL.md, "Estimates of unmeasured devices").
  void end_slot();
  // The cluster as the policy sees it: estimated speeds and link tiers, the announced prices
  // and availability, with `hidden` device ids still shown available.
  planner::cluster_state view(const planner::cluster_state& announced, const std::vector<int>& hidden) const;
  // Checkpoints: what has been learnt, speeds in the nominal cluster's device order.
  struct learnt {
    std::vector<double> speeds;
    double tiers[3] = {1, 1, 1};
  };
  learnt snapshot() const;
  void restore(const learnt& l);  // a different device count is ignored

 private:
  planner::cluster_state nominal_;
  planner::profile_sums sums_;
  void fold_speed(std::size_t i, double measured);
  static constexpr double fast_alpha = 0.5, shift_ratio = 0.25;
  static constexpr int shift_steps = 3;
  static constexpr double unseen_half_life_slots = 4;

  double alpha_;
  std::vector<double> speed_;
  std::vector<double> recent_;  // speeds smoothed with fast_alpha, to see level shifts
  std::vector<int> shifted_;    // steps in a row recent_ stayed off speed_ (sign: which side)
  std::vector<double> prior_;  // what an unmeasured device relaxes to: announced or nominal
  std::vector<bool> seen_;     // measured in the current slot
  std::vector<bool> guessed_;  // relaxed since it was last measured
  double tier_mult_[3] = {1, 1, 1};
};

}  // namespace dynapar::control
