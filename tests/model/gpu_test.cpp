// [gpu]: devices on a CUDA GPU. Each case says it was skipped (and ctest marks it so) where
// no CUDA device is visible: CPU-only LibTorch, or no GPU. tools/gpu/check.sh runs them on
// the device machine (docs/GPU.md).
#include <catch2/catch.hpp>

#include "data/sampler.hpp"
#include "model/channel.hpp"

using namespace dynapar;
using namespace dynapar::model;

#define REQUIRE_GPU()                                                      \
  do {                                                                     \
    if (cuda_device_count() == 0) {                                        \
      WARN("skipped: no CUDA device is visible");                          \
      return;                                                              \
    }                                                                      \
    REQUIRE(check_place("cuda:0"));                                        \
  } while (0)

namespace {

const optimizer_config gpu_adam{"adam", 1e-3, 0.9, 0};

// `steps` of a two-stage pipeline, stage A (layers [0, split)) on `place_a` and B on
// `place_b`, micro-batches in order, each layer's gradients summed over micro-batches in
// the exact sum's tree and applied: what the runtime does for one group, without the actors.
std::vector<layer_copy> two_stages(const model_chain& m, const std::string& place_a, const std::string& place_b, int split,
                                   const data::dataset& d, int batch, int micro, int steps) {
  auto a = make_worker(gpu_adam, place_a), b = make_worker(gpu_adam, place_b);
  const int layers = num_layers(m);
  for (int l = 0; l < layers; ++l) (l < split ? a : b)->hold(l, copy_layer(m, l));
  data::global_sampler sampler(d.size(), batch, 7);
  for (int t = 0; t < steps; ++t) {
    const auto samples = sampler.step_samples(t);
    a->begin_step(0);
    b->begin_step(0);
    for (int lo = 0, i = 0; lo < batch; lo += micro, ++i) {
      auto y = a->forward(i, 0, split, inputs(d, samples, lo, lo + micro));
      REQUIRE(y);
      REQUIRE(b->forward(i, split, layers, *y));
      auto g = b->backward_from_loss(i, targets(d, samples, lo, lo + micro));
      REQUIRE(g);
      REQUIRE(a->backward(i, *g));
    }
    for (int l = 0; l < layers; ++l) {
      auto& w = l < split ? a : b;
      auto summed = tree_sum(w->partial_gradients(l), batch / micro);
      REQUIRE(summed);
      REQUIRE(w->apply(l, *summed, batch, 0, 1.0));
    }
  }
  std::vector<layer_copy> out;
  for (int l = 0; l < layers; ++l) out.push_back((l < split ? a : b)->copy(l));
  return out;
}

std::vector<layer_copy> one_device(const model_chain& m, const std::string& place, const data::dataset& d, int batch, int micro,
                                   int steps) {
  reference ref(m, gpu_adam, place);
  data::global_sampler sampler(d.size(), batch, 7);
  for (int t = 0; t < steps; ++t) ref.step(d, sampler.step_samples(t), micro);
  return ref.layers();
}

}  // namespace

TEST_CASE("a pipeline of two GPU devices equals one GPU bit for bit", "[gpu]") {
  REQUIRE_GPU();
  const auto d = data::synthetic(512, 3);
  for (const char* name : {"cnn", "mlp", "resnet"}) {
    auto m = make_model(name, 5);
    REQUIRE(m);
    const auto run = two_stages(**m, "cuda:0", "cuda:0", 2, d, 64, 16, 4);
    const double diff = max_rel_diff(run, one_device(**m, "cuda:0", d, 64, 16, 4));
    INFO(name << ": max relative difference " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("a CPU stage feeding a GPU stage trains as close to one device as a CPU is to a GPU", "[gpu]") {
  REQUIRE_GPU();
  const auto d = data::synthetic(512, 3);
  auto m = make_model("cnn", 5);
  REQUIRE(m);
  const auto run = two_stages(**m, "cpu", "cuda:0", 2, d, 64, 16, 4);
  const auto gpu = one_device(**m, "cuda:0", d, 64, 16, 4), cpu = one_device(**m, "cpu", d, 64, 16, 4);
  const double vs_gpu = max_rel_diff(run, gpu), vs_cpu = max_rel_diff(run, cpu), cpu_vs_gpu = max_rel_diff(cpu, gpu);
  WARN("4 Adam steps, max relative difference: mixed pipeline vs one GPU " << vs_gpu << ", vs one CPU " << vs_cpu
                                                                              << "; one CPU vs one GPU " << cpu_vs_gpu);
  // Different kernels round differently: not bit for bit. The yardstick is how far the two
  // single-device runs are apart; a mixed run (half its layers on each) lies within it.
  CHECK(cpu_vs_gpu < 1e-2);
  CHECK(vs_gpu <= cpu_vs_gpu * 1.5);
  CHECK(vs_cpu <= cpu_vs_gpu * 1.5);
  // The layers really trained (the comparison is not between two untouched models).
  CHECK(max_rel_diff(run, one_device(**m, "cpu", d, 64, 16, 0)) > 1e-3);
}

TEST_CASE("a layer moves between a GPU and the CPU with its optimizer state", "[gpu]") {
  REQUIRE_GPU();
  const auto d = data::synthetic(256, 3);
  auto m = make_model("cnn", 5);
  REQUIRE(m);
  auto gpu = make_worker(gpu_adam, "cuda:0"), cpu = make_worker(gpu_adam, "cpu");
  for (int l = 0; l < num_layers(**m); ++l) gpu->hold(l, copy_layer(**m, l));
  const auto run = two_stages(**m, "cuda:0", "cuda:0", 4, d, 32, 16, 2);
  for (int l = 0; l < num_layers(**m); ++l) gpu->hold(l, run[l]);
  // GPU -> host -> wire form -> a CPU device -> back: the same bits and state.
  for (int l = 0; l < num_layers(**m); ++l) {
    auto back = from_wire(**m, l, to_wire(gpu->copy(l)));
    REQUIRE(back);
    cpu->hold(l, *back);
    CHECK(cpu->hash(l) == gpu->hash(l));
    CHECK(bytes(*back) == bytes(gpu->copy(l)));
  }
}

TEST_CASE("the profile is measured on the GPU", "[gpu]") {
  REQUIRE_GPU();
  auto m = make_model("cnn", 1);
  REQUIRE(m);
  auto gpu = measure_profile(**m, 32, 3, gpu_adam, "cuda:0");
  REQUIRE(gpu);
  REQUIRE(gpu->num_layers() == num_layers(**m));
  for (const auto& l : gpu->layers) CHECK(l.fwd_s + l.fixed_s > 0);
}

TEST_CASE("NCCL with one rank per communicator: all-reduce, send to itself, the ordered sum", "[gpu]") {
  REQUIRE_GPU();
  auto id = new_nccl_id();
  REQUIRE(id);
  auto c = make_nccl_channel(*id, 0, 1, 0);
  REQUIRE(c);
  CHECK((*c)->size() == 1);
  auto t = tensor_of({1.5f, -2.f, 3.25f}, "cuda:0");
  REQUIRE((*c)->all_reduce_sum(t));
  CHECK(values_of(t) == std::vector<float>{1.5f, -2.f, 3.25f});
  auto got = tensor_of({0.f, 0.f, 0.f}, "cuda:0");
  REQUIRE((*c)->send_recv(t, 0, got, 0));
  CHECK(values_of(got) == std::vector<float>{1.5f, -2.f, 3.25f});
  REQUIRE(ordered_sum(**c, t));
  CHECK(values_of(t) == std::vector<float>{1.5f, -2.f, 3.25f});
  // A host tensor is refused with a reason, not a crash.
  const auto st = (*c)->all_reduce_sum(tensor_of({1.f}, "cpu"));
  REQUIRE_FALSE(st);
  CHECK(st.err().code == "bad_tensor");
  CHECK(make_nccl_channel(*id, 1, 1, 0).err().code == "bad_rank");
}
