// A group of a plan for the step tests: its devices one stage each, a layer a stage.
#pragma once

#include <vector>

#include "planner/plan.hpp"

namespace step_test {

inline dynapar::planner::group_plan group(std::vector<int> devices, int share, int micro) {
  std::vector<int> splits;
  for (std::size_t j = 0; j <= devices.size(); ++j) splits.push_back(static_cast<int>(j));
  return {std::move(devices), std::move(splits), share, micro};
}

}  // namespace step_test
