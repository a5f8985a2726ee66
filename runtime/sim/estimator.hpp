// What a policy knows: speeds and link bandwidths estimated online from measured (noisy)
// stage and transfer times of past steps, never from the world's future. Pure.
#pragma once

#include <vector>

#include "common/rng.hpp"
#include "sim/des.hpp"

namespace dynapar::sim {

class estimator {
 public:
  // Starts from the nominal specs devices announce when they join.
  estimator(const planner::cluster_state& nominal, const planner::model_profile& model, double smoothing);
  // Folds in one step's measurements; `noise` perturbs each measured time (relative std-dev).
  void observe(const step_outcome& step, const planner::problem& truth, double noise, rng& r);
  // The cluster as the policy sees it: estimated speeds and link tiers, the truth's prices
  // and availability (both announced), with `hidden` device ids still shown available.
  // A device (re)joins announcing a measured speed: the estimate restarts there.
  void announce(int device_id, double speed);
  planner::cluster_state view(const planner::cluster_state& truth, const std::vector<int>& hidden) const;
  // Checkpoints: what has been learnt, speeds in the nominal cluster's device order.
  struct learnt {
    std::vector<double> speeds;
    double tiers[3] = {1, 1, 1};
  };
  learnt snapshot() const;
  void restore(const learnt& l);  // a different device count is ignored

 private:
  planner::cluster_state nominal_;
  const planner::model_profile& model_;
  planner::profile_sums sums_;
  double alpha_;
  std::vector<double> speed_;
  double tier_mult_[3] = {1, 1, 1};
};

}  // namespace dynapar::sim
