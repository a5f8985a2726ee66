// Where a device computes: the host's CPU or a CUDA device (docs/GPU.md).
#include <torch/cuda.h>

#include <cstdlib>
#include <mutex>

#include "model/boxes.hpp"

namespace dynapar::model {
namespace {

// A run equals one device only if each kernel gives the same bits every time: deterministic
// algorithms (warn-only, so an operation without a deterministic kernel still runs and the
// verify figure shows what it cost), cuBLAS with a fixed workspace, no TF32, no cuDNN
// autotuning. Process-wide in LibTorch, so set once, before the first CUDA work.
void make_cuda_deterministic() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    auto& ctx = at::globalContext();
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
    ctx.setAllowTF32CuBLAS(false);
    ctx.setAllowTF32CuDNN(false);
  });
}

}  // namespace

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

status check_place(const std::string& place) {
  if (place == "cpu") return ok_status();
  const std::string prefix = "cuda:";
  const bool digits = place.size() > prefix.size() && place.size() <= prefix.size() + 3 &&
                      place.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
  if (place.compare(0, prefix.size(), prefix) != 0 || !digits)
    return make_error("bad_place", "place '" + place + "' is neither 'cpu' nor 'cuda:N'");
  const int index = std::stoi(place.substr(prefix.size())), count = cuda_device_count();
  if (count == 0)
    return make_error("no_gpu", "place '" + place + "': no CUDA device is visible (this LibTorch is CPU-only or the machine has no GPU; docs/GPU.md)");
  if (index >= count)
    return make_error("no_gpu", "place '" + place + "': only " + std::to_string(count) + " CUDA device(s) are visible");
  make_cuda_deterministic();
  return ok_status();
}

torch::Device device_of(const std::string& place) { return place == "cpu" ? torch::Device(torch::kCPU) : torch::Device(place); }

torch::Device device_of(const torch::nn::Sequential& layer) {
  for (const auto& p : layer->parameters()) return p.device();
  return torch::kCPU;
}

void synchronize(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

}  // namespace dynapar::model
