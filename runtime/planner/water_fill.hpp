// Linear solving (docs/MODEL.md): split the global batch over groups so that all
// finish together. Pure.
#pragma once

#include <functional>
#include <vector>

#include "common/result.hpp"

namespace dynapar::planner {

struct affine_group {
  double alpha = 0;    // seconds per sample
  double beta = 0;     // fixed seconds
  double cap = 0;      // most samples memory allows
};

struct fill_result {
  std::vector<double> shares;
  double finish = 0;   // common finish time T*
};

// Continuous water-filling: b_g = clamp((T* - beta_g) / alpha_g, 0, cap_g) with sum b_g =
// batch, T* found over the sorted breakpoints in O(G log G). Error when caps cannot hold it.
result<fill_result> water_fill(const std::vector<affine_group>& groups, double batch);

// Integer shares minimising max_g time_g(b_g) exactly, for non-decreasing time functions:
// the optimum's makespan is the batch-th smallest of all the values time_g(1..cap_g). A
// bisection finds a makespan bound holding at least `batch` values; the largest are then
// trimmed, slowest group first, until `batch` remain. Error when caps cannot hold the batch.
// With quantum q > 1 every share is a multiple of q (batch must be one): exact training needs
// micro-batches of one fixed size.
result<std::vector<int>> integer_shares(const std::vector<std::function<double(int)>>& time,
                                        const std::vector<int>& caps, int batch, int quantum = 1);

}  // namespace dynapar::planner
