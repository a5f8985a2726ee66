// Communication-aware partitioning (docs/MODEL.md): split a layer chain over an
// ordered group so the slowest stage or boundary is as fast as possible. Pure.
#pragma once

#include <optional>
#include <vector>

#include "planner/time_model.hpp"

namespace dynapar::planner {

// Exact dynamic programme over (stage, last layer), O(n L^2): minimises the bottleneck R,
// then, among splits reaching it, the fill S (one micro-batch through the whole group).
// Every stage gets at least one layer and must fit its device's memory. nullopt: no split fits.
// Without least_fill, any split reaching R* (half the work: the search scores with it and
// refines only the plans it keeps).
std::optional<std::vector<int>> partition_layers(const problem& p, const std::vector<int>& devices, int u,
                                                 bool least_fill = true);

// The group's best shape for an expected share: tries each micro-batch candidate (a single
// stage takes the largest micro-batch its memory allows) and keeps the fastest.
std::optional<group_shape> best_shape(const problem& p, const std::vector<int>& devices, double share_estimate);

}  // namespace dynapar::planner
