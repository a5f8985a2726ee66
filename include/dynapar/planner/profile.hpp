// A model as the planner sees it: a chain of layers with per-sample times at reference speed
// and byte sizes (docs/MODEL.md). Pure data; thread-safe to share once built.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::planner {

struct layer_profile {
  std::string name;
  double fwd_s = 0;          // forward time per sample on the reference device
  double bwd_s = 0;          // backward time per sample on the reference device
  double fixed_s = 0;        // per micro-batch overhead (kernel launches), fwd + bwd together
  double act_bytes = 0;      // bytes of the activation leaving this layer, per sample
  double param_bytes = 0;    // parameter bytes (gradients have the same size)
  double act_mem_bytes = 0;  // activation memory kept for backward, per sample
  double update_s = 0;       // one optimizer step on the layer's parameters, once a step, by
                             // every holder (0: not measured, e.g. the paper's profiles)
};

struct model_profile {
  std::string name;
  std::vector<layer_profile> layers;
  double optimizer_state_factor = 0;  // k: 0 SGD, 1 momentum, 2 Adam
  int num_layers() const { return static_cast<int>(layers.size()); }
};

// Rejects empty models, negative or non-finite numbers; names the layer and field.
status validate(const model_profile& model);

// Prefix sums so that any layer range [lo, hi) costs O(1) to price.
class profile_sums {
 public:
  explicit profile_sums(const model_profile& model);
  double work(int lo, int hi) const { return work_[hi] - work_[lo]; }  // fwd + bwd per sample
  double fwd(int lo, int hi) const { return fwd_[hi] - fwd_[lo]; }
  double fixed(int lo, int hi) const { return fixed_[hi] - fixed_[lo]; }
  double params(int lo, int hi) const { return param_[hi] - param_[lo]; }
  double act_mem(int lo, int hi) const { return mem_[hi] - mem_[lo]; }
  double update(int lo, int hi) const { return update_[hi] - update_[lo]; }
  // Activation bytes crossing the boundary after layer `cut` (1-based count of layers before it).
  double boundary_bytes(int cut) const { return act_[cut]; }
  int num_layers() const { return static_cast<int>(work_.size()) - 1; }
  double total_work() const { return work_.back(); }

 private:
  std::vector<double> work_, fwd_, fixed_, param_, mem_, act_, update_;
};

}  // namespace dynapar::planner
