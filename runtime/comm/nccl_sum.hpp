// NCCL on the GPUs this process sees: a sum (all-reduce) of float32 buffers, one per GPU, as
// a group's gradient sum would run on GPUs (`dynapar bench nccl`). Built only where CMake
// finds NCCL and the CUDA runtime (DYNAPAR_WITH_NCCL); everywhere else the call says so.
#pragma once

#include <cstddef>
#include <vector>

#include "common/result.hpp"

namespace dynapar::comm {

struct nccl_timing {
  int gpus = 0;
  std::vector<double> seconds;  // one per timed all-reduce
};

// Fills GPU i's buffer with i + 1, all-reduces `iters` times after 3 warm-ups and checks
// that the sum came back. Errors: no CUDA device, a CUDA or NCCL failure, a wrong sum.
result<nccl_timing> nccl_allreduce_times(std::size_t floats, int iters);

}  // namespace dynapar::comm
