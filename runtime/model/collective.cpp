#include "model/collective.hpp"

#include <chrono>

#ifdef DYNAPAR_GLOO_HEADERS
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>
#endif

namespace dynapar::model {

result<std::vector<double>> gloo_allreduce_times(const std::string& store_file, int rank, int world, std::size_t floats,
                                                 int iters) {
#ifdef DYNAPAR_GLOO_HEADERS
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(store_file, world);
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
    std::vector<double> times;
    for (int i = 0; i < iters + 3; ++i) {
      std::vector<at::Tensor> t{torch::full({static_cast<std::int64_t>(floats)}, static_cast<float>(rank + 1))};
      const auto t0 = std::chrono::steady_clock::now();
      pg->allreduce(t)->wait();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const float want = static_cast<float>(world * (world + 1) / 2);
      if (t[0][0].item<float>() != want) return make_error("bench", "Gloo's all-reduce returned a wrong sum");
      if (i >= 3) times.push_back(s);
    }
    return times;
  } catch (const std::exception& e) {
    return make_error("gloo", std::string("Gloo: ") + e.what());
  }
#else
  (void)store_file, (void)rank, (void)world, (void)floats, (void)iters;
  return make_error("no_gloo", "built without Gloo (install libgloo-dev and rebuild)");
#endif
}

}  // namespace dynapar::model
