// CUDA and NCCL return codes as dynapar's error values. Included only where CMake found NCCL
// and the CUDA runtime (DYNAPAR_HAVE_NCCL): comm/nccl_sum.cpp and model/channel.cpp.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "common/result.hpp"

namespace dynapar::comm {

inline status cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  return make_error("cuda", std::string(what) + ": " + cudaGetErrorString(e));
}

inline status nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return ok_status();
  return make_error("nccl", std::string(what) + ": " + ncclGetErrorString(r));
}

}  // namespace dynapar::comm
