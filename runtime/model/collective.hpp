// LibTorch's own collective backend (c10d ProcessGroupGloo), so that dynapar's gradient sums
// can be measured against it in the same run (`dynapar bench sum`, docs/BENCHMARKS.md).
// Built when Debian's libgloo-dev headers are found; otherwise an error says so.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::model {

// Joins a Gloo group of `world` processes (rendezvous through a FileStore at `store_file`,
// transport over loopback TCP) and all-reduces (sums) a float32 tensor of `floats` elements
// `iters` times after 3 warm-up rounds. Returns each round's seconds, and checks the sum.
result<std::vector<double>> gloo_allreduce_times(const std::string& store_file, int rank, int world, std::size_t floats,
                                                 int iters);

}  // namespace dynapar::model
