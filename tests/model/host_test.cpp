// Host-side comparison (model/host.cpp): what --verify's figure is made of.
#include "support/torch_catch.hpp"

#include <cmath>
#include <limits>

#include "model/boxes.hpp"

using namespace dynapar::model;

namespace {
layer_copy linear_with_bn(float w) {
  torch::nn::Sequential s(torch::nn::Linear(2, 2), torch::nn::BatchNorm1d(2));
  torch::NoGradGuard no_grad;
  for (auto& p : s->parameters()) p.fill_(w);
  return std::make_shared<layer_box>(layer_box{s, {}});
}
}  // namespace

TEST_CASE("max_rel_diff: equal models 0, a NaN or a moved buffer counts", "[unit][model]") {
  const std::vector<layer_copy> a{linear_with_bn(0.5f)}, b{linear_with_bn(0.5f)};
  CHECK(max_rel_diff(a, b) == 0.0);
  // A NaN parameter differs without bound, whatever the tolerance.
  std::vector<layer_copy> nan{linear_with_bn(0.5f)};
  {
    torch::NoGradGuard no_grad;
    nan[0]->module->parameters().front()[0][0] = std::numeric_limits<float>::quiet_NaN();
  }
  CHECK(std::isinf(max_rel_diff(nan, b)));
  CHECK(std::isinf(max_rel_diff(b, nan)));
  // Buffers (BatchNorm's running statistics) are compared with the parameters: a running mean
  // of 0.25 against 0 in a model whose largest value there is 0.25 differs by 1.
  std::vector<layer_copy> moved{linear_with_bn(0.5f)};
  {
    torch::NoGradGuard no_grad;
    moved[0]->module->buffers().front().fill_(0.25);
  }
  CHECK(max_rel_diff(b, moved) == 1.0);
  // Models that do not line up differ without bound.
  CHECK(std::isinf(max_rel_diff(a, {})));
}
