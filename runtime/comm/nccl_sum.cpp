#include "comm/nccl_sum.hpp"

#include <chrono>
#include <string>

#ifdef DYNAPAR_HAVE_NCCL
#include "comm/nccl_status.hpp"
#endif

namespace dynapar::comm {

#ifdef DYNAPAR_HAVE_NCCL
namespace {

// What one GPU holds; freed in the destructor, whatever fails on the way.
struct gpu_side {
  int device = 0;
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  ~gpu_side() {
    cudaSetDevice(device);
    if (comm) ncclCommDestroy(comm);
    if (stream) cudaStreamDestroy(stream);
    if (buf) cudaFree(buf);
  }
};

}  // namespace

result<nccl_timing> nccl_allreduce_times(std::size_t floats, int iters) {
  int n = 0;
  if (auto st = cuda(cudaGetDeviceCount(&n), "counting CUDA devices"); !st) return st.err();
  if (n < 1) return make_error("no_gpu", "no CUDA device is visible");
  std::vector<gpu_side> gpus(static_cast<std::size_t>(n));
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& g = gpus[i];
    g.device = ids[i] = i;
    if (auto st = cuda(cudaSetDevice(i), "selecting a GPU"); !st) return st.err();
    if (auto st = cuda(cudaMalloc(reinterpret_cast<void**>(&g.buf), floats * sizeof(float)), "allocating"); !st) return st.err();
    if (auto st = cuda(cudaStreamCreate(&g.stream), "creating a stream"); !st) return st.err();
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
  if (auto st = nccl(ncclCommInitAll(comms.data(), n, ids.data()), "ncclCommInitAll"); !st) return st.err();
  for (int i = 0; i < n; ++i) gpus[i].comm = comms[i];
  nccl_timing out;
  out.gpus = n;
  for (int it = 0; it < iters + 3; ++it) {
    for (int i = 0; i < n; ++i) {
      const std::vector<float> fill(floats, static_cast<float>(i + 1));
      cudaSetDevice(i);
      if (auto st = cuda(cudaMemcpy(gpus[i].buf, fill.data(), floats * sizeof(float), cudaMemcpyHostToDevice), "filling"); !st)
        return st.err();
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (auto st = nccl(ncclGroupStart(), "ncclGroupStart"); !st) return st.err();
    for (int i = 0; i < n; ++i)
      if (auto st = nccl(ncclAllReduce(gpus[i].buf, gpus[i].buf, floats, ncclFloat, ncclSum, gpus[i].comm, gpus[i].stream),
                         "ncclAllReduce");
          !st)
        return st.err();
    if (auto st = nccl(ncclGroupEnd(), "ncclGroupEnd"); !st) return st.err();
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      if (auto st = cuda(cudaStreamSynchronize(gpus[i].stream), "waiting for the sum"); !st) return st.err();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float first = 0;
    cudaSetDevice(0);
    if (auto st = cuda(cudaMemcpy(&first, gpus[0].buf, sizeof(float), cudaMemcpyDeviceToHost), "reading back"); !st) return st.err();
    if (floats > 0 && first != static_cast<float>(n * (n + 1) / 2)) return make_error("nccl", "the all-reduce returned a wrong sum");
    if (it >= 3) out.seconds.push_back(s);
  }
  return out;
}

#else

result<nccl_timing> nccl_allreduce_times(std::size_t, int) {
  return make_error("no_nccl", "built without NCCL (CMake found no nccl.h and libnccl; see DYNAPAR_WITH_NCCL)");
}

#endif

}  // namespace dynapar::comm
