// Built-in profiles against published parameter and FLOP counts of the real architectures.
#include <catch2/catch.hpp>

#include "planner/builtin_profiles.hpp"

using namespace dynapar;
using namespace dynapar::planner;

namespace {
double total_params(const model_profile& m, int skip_last = 0) {
  double p = 0;
  for (int l = 0; l + skip_last < m.num_layers(); ++l) p += m.layers[l].param_bytes / 4;
  return p;
}
double total_gflops(const model_profile& m, const profile_options& o) {
  double f = 0;
  for (const auto& l : m.layers) f += l.fwd_s * o.reference_flops_per_s;
  return f / 1e9;
}
}  // namespace

TEST_CASE("built-in profiles match published sizes", "[unit][planner]") {
  profile_options o;
  // torchvision: ResNet-50 25.56 M parameters, 4.1 GMACs; VGG-16 138.36 M, 15.5 GMACs.
  auto r50 = *builtin_profile("resnet50", o);
  CHECK(r50.num_layers() == 50);
  CHECK(total_params(r50) == Approx(25.56e6).epsilon(0.01));
  CHECK(total_gflops(r50, o) == Approx(2 * 4.1).epsilon(0.03));
  auto vgg = *builtin_profile("vgg16", o);
  CHECK(total_params(vgg) == Approx(138.36e6).epsilon(0.01));
  CHECK(total_gflops(vgg, o) == Approx(2 * 15.5).epsilon(0.03));
  // GPT-2 small: 124 M parameters with the LM head tied to the embedding (our chain's last
  // stage holds its own copy, so it is left out here).
  auto gpt = *builtin_profile("gpt2_small", o);
  CHECK(gpt.num_layers() == 14);
  CHECK(total_params(gpt, 1) == Approx(124.4e6).epsilon(0.01));
  auto xl = *builtin_profile("gpt2_xl", o);
  CHECK(xl.num_layers() == 50);
  CHECK(total_params(xl, 1) == Approx(1558e6).epsilon(0.01));
  // Fashion-MNIST CNN: 320 + 18 496 + 401 536 + 1 290 parameters.
  auto cnn = *builtin_profile("fmnist_cnn", o);
  CHECK(total_params(cnn) == Approx(421642));
  CHECK(validate(cnn));
}

TEST_CASE("profiles reject what is not a model", "[unit][planner]") {
  model_profile m;
  CHECK_FALSE(validate(m));
  m.layers.push_back({"bad", -1, 0, 0, 0, 0, 0});
  auto s = validate(m);
  REQUIRE_FALSE(s);
  CHECK(s.err().message.find("layers[0]") != std::string::npos);
  CHECK(s.err().message.find("fwd_s") != std::string::npos);
  CHECK_FALSE(builtin_profile("alexnet"));
}
