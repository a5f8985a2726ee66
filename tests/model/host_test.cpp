// Host-side comparison (model/host.cpp): what --verify's figure is made of.
#include "support/torch_catch.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "model/boxes.hpp"

using namespace dynapar::model;

namespace {
layer_copy linear_with_bn(float w) {
  torch::nn::Sequential s(torch::nn::Linear(2, 2), torch::nn::BatchNorm1d(2));
  torch::NoGradGuard no_grad;
  for (auto& p : s->parameters()) p.fill_(w);
  return std::make_shared<layer_box>(layer_box{s, {}, {}});
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

TEST_CASE("state_hashes: equal layers hash alike, a changed bit of a parameter, buffer or optimizer state does not", "[unit][model]") {
  const std::vector<layer_copy> a{linear_with_bn(0.5f), linear_with_bn(0.25f)}, b{linear_with_bn(0.5f), linear_with_bn(0.25f)};
  const auto ha = state_hashes(a);
  REQUIRE(ha.size() == 2);
  CHECK(ha == state_hashes(b));
  CHECK(ha[0] != ha[1]);
  auto flip_low_bit = [](const torch::Tensor& t) {  // the last bit of element 0
    torch::NoGradGuard no_grad;
    auto f = t.flatten();
    std::int32_t bits;
    float v = f[0].item<float>();
    std::memcpy(&bits, &v, 4);
    bits ^= 1;
    std::memcpy(&v, &bits, 4);
    f[0] = v;
  };
  flip_low_bit(b[1]->module->parameters().back());
  CHECK(state_hashes(b)[0] == ha[0]);
  CHECK(state_hashes(b)[1] != ha[1]);
  const std::vector<layer_copy> c{linear_with_bn(0.5f)};
  const auto hc = state_hashes(c)[0];
  flip_low_bit(c[0]->module->buffers().front());
  CHECK(state_hashes(c)[0] != hc);
  // Optimizer state: a trained copy (SGD with momentum) against the same with one bit of its
  // momentum buffer changed.
  auto opt = make_optimizer(c[0]->module->parameters(), optimizer_config{"sgd", 0.1, 0.9, 0});
  for (auto& p : c[0]->module->parameters()) p.mutable_grad() = torch::ones_like(p);
  opt->step();
  for (const auto& p : c[0]->module->parameters())
    c[0]->states.push_back(copy_state(*opt->state().at(state_key(p)), torch::kCPU));
  const auto trained = state_hashes(c)[0];
  flip_low_bit(static_cast<torch::optim::SGDParamState&>(*c[0]->states[0]).momentum_buffer());
  CHECK(state_hashes(c)[0] != trained);
}

TEST_CASE("layer_source: a node's layers one at a time are the whole model's, fresh and as sent", "[unit][model]") {
  for (const std::string name : {"mlp", "cnn", "resnet"}) {
    INFO(name);
    auto whole = make_model(name, 5);
    REQUIRE(whole);
    auto alone = layer_source::open(name, 5);
    REQUIRE(alone);
    const auto of_whole = layer_source::of(*whole);
    REQUIRE(alone->num_layers() == num_layers(**whole));
    for (int l = 0; l < alone->num_layers(); ++l) {
      INFO("layer " << l);
      const auto f = alone->fresh(l);
      REQUIRE(f);
      CHECK(state_hashes({*f}) == state_hashes({copy_layer(**whole, l)}));
      // A trained-looking state (every parameter shifted) read back on either source.
      auto changed = copy_layer(**whole, l);
      for (auto& p : changed->module->parameters()) p.data().add_(0.5);
      const auto w = to_wire(changed);
      const auto a = alone->from_wire(l, w), b = of_whole.from_wire(l, w);
      REQUIRE((a && b));
      CHECK(state_hashes({*a}) == state_hashes({changed}));
      CHECK(state_hashes({*b}) == state_hashes({changed}));
    }
    CHECK_FALSE(alone->fresh(alone->num_layers()));
    CHECK_FALSE(alone->fresh(-1));
  }
  CHECK_FALSE(layer_source::open("no_such_model", 1));
}

TEST_CASE("make_layer: each built-in layer built by itself is make_model's, bit for bit, its seed is its own", "[unit][model]") {
  for (const std::string name : {"mlp", "linear", "cnn", "resnet", "transformer", "gpt_lm"}) {
    INFO(name);
    auto whole = make_model(name, 7);
    REQUIRE(whole);
    std::vector<layer_copy> all, alone, other_seed;
    for (int l = 0; l < num_layers(**whole); ++l) {
      all.push_back(copy_layer(**whole, l));
      auto one = make_layer(name, 7, l);
      REQUIRE(one);
      alone.push_back(*one);
      other_seed.push_back(*make_layer(name, 8, l));
    }
    const auto h = state_hashes(all), ha = state_hashes(alone), hs = state_hashes(other_seed);
    CHECK(h == ha);
    for (std::size_t l = 0; l < h.size(); ++l)
      if (!all[l]->module->parameters().empty()) CHECK(hs[l] != h[l]);  // parameterless layers hash alike
  }
  // Layers of one shape (gpt_lm's 4 blocks) start from different draws.
  auto b1 = make_layer("gpt_lm", 7, 1), b2 = make_layer("gpt_lm", 7, 2);
  REQUIRE((b1 && b2));
  CHECK(state_hashes({*b1}) != state_hashes({*b2}));
  CHECK(make_layer("cnn", 7, 4).err().message == "model 'cnn' has 4 layers; no layer 4");
  CHECK(make_layer("nope", 7, 0).err().code == "unknown_model");
}

TEST_CASE("a layer built while another thread copies layers is built bit for bit as alone", "[unit][model]") {
  // A node builds the fresh layers of its devices while they copy others in (hold): LibTorch's
  // clone() initialises the copy from the process-wide generator before copying values, and
  // drew between a build's seeding and its draws (the flagship over 4 nodes, with the first
  // plan's layers asked for at once: "layer 2 built here ... differs from the controller's").
  const auto want = state_hashes({*make_layer("mlp", 7, 1)}).front();
  torch::nn::Sequential many;  // many small draws: one lands in any gap of a build
  for (int i = 0; i < 64; ++i) many->push_back(torch::nn::Linear(8, 8));
  std::atomic<bool> done{false};
  std::thread copier([&] {
    while (!done) {
      deep_copy(many);
      std::this_thread::sleep_for(std::chrono::microseconds(100));  // the lock is not fair: room for the builds
    }
  });
  int differed = 0;
  for (int i = 0; i < 20; ++i) differed += state_hashes({*make_layer("mlp", 7, 1)}).front() != want;
  done = true;
  copier.join();
  CHECK(differed == 0);
}

TEST_CASE("an outline holds no layer, yet gives the whole model's layers, sizes, profile and reference", "[unit][model]") {
  for (const std::string name : {"mlp", "cnn", "resnet"}) {
    INFO(name);
    auto whole = make_model(name, 3);
    auto outline = make_model(name, 3, true);
    REQUIRE((whole && outline));
    const auto& o = **outline;
    REQUIRE(num_layers(o) == num_layers(**whole));
    CHECK(o.names == (*whole)->names);
    for (int l = 0; l < num_layers(o); ++l) {
      INFO("layer " << l);
      CHECK(o.layers[l]->parameters().empty());  // nothing of it kept
      CHECK(param_bytes(o, l) == param_bytes(**whole, l));
      CHECK(param_count(o, l) == param_count(**whole, l));
      CHECK(state_hashes({copy_layer(o, l)}) == state_hashes({copy_layer(**whole, l)}));
      auto changed = copy_layer(**whole, l);
      for (auto& p : changed->module->parameters()) p.data().add_(0.25);
      const auto back = from_wire(o, l, to_wire(changed));
      REQUIRE(back);
      CHECK(state_hashes({*back}) == state_hashes({changed}));
    }
    // A profile measured on the outline sees the same layers (sizes; times are this machine's).
    const auto pw = measure_profile(**whole, 4, 1, {}), po = measure_profile(o, 4, 1, {});
    REQUIRE((pw && po));
    REQUIRE(po->num_layers() == pw->num_layers());
    for (int l = 0; l < po->num_layers(); ++l) {
      CHECK(po->layers[l].param_bytes == pw->layers[l].param_bytes);
      CHECK(po->layers[l].act_bytes == pw->layers[l].act_bytes);
    }
    // The one-device reference built from either starts from the same bits.
    CHECK(state_hashes(reference(o, {}).layers()) == state_hashes(reference(**whole, {}).layers()));
  }
  CHECK_FALSE(make_model("no_such_model", 1, true));
}

TEST_CASE("drop_optimizer_state: a copy keeps its parameters, buffers and whole state's hash, and loses its optimizer state", "[unit][model]") {
  auto a = linear_with_bn(0.5f);
  const auto params_only = state_hashes({a}).front();
  auto st = std::make_unique<torch::optim::AdamParamState>();
  st->step(3);
  st->exp_avg(torch::ones({2, 2}));
  st->exp_avg_sq(torch::ones({2, 2}));
  a->states.push_back(std::move(st));
  const auto whole = state_hashes({a}).front();
  REQUIRE(whole != params_only);
  const auto params = a->module->parameters();
  drop_optimizer_state(a);
  CHECK(a->states.empty());
  CHECK(a->module->parameters()[0].data_ptr() == params[0].data_ptr());
  CHECK(state_hashes({a}).front() == whole);  // what it was, optimizer state included
  auto b = linear_with_bn(0.5f);  // one whose state went elsewhere: the hash it came with
  drop_optimizer_state(b, 42);
  CHECK(state_hashes({b}).front() == 42);
}

TEST_CASE("score: a chunk's correct predictions or squared errors, by hand, metric_of divides by the set", "[unit][model]") {
  // Classes: argmax of each row [1, 0, 1] against labels [1, 1, 1]: 2 correct.
  const auto logits = box(torch::tensor({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}).reshape({3, 2}));
  const auto labels = box(torch::tensor({1, 1, 1}, torch::kInt64));
  auto c = score(logits, labels);
  REQUIRE(c);
  CHECK(*c == 2);
  // A regression of one value a sample: (1 - 0)^2 + (2 - 4)^2 = 5, whatever the outputs' shape.
  auto r = score(box(torch::tensor({1.0f, 2.0f})), box(torch::tensor({0.0f, 4.0f}).reshape({2, 1})));
  REQUIRE(r);
  CHECK(*r == 5);
  // Next-token: every position counts, [2 samples, 2 positions, 3 classes].
  const auto scores = box(torch::tensor({0.f, 1.f, 0.f, 1.f, 0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 1.f, 0.f}).reshape({2, 2, 3}));
  auto n = score(scores, box(torch::tensor({1, 0, 2, 2}, torch::kInt64).reshape({2, 2})));
  REQUIRE(n);
  CHECK(*n == 3);
  // Outputs that do not match the targets: an error naming both shapes, not a crash.
  auto bad = score(box(torch::zeros({3, 2})), box(torch::zeros({2, 5})));
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("[3, 2]") != std::string::npos);
  CHECK(bad.err().message.find("[2, 5]") != std::string::npos);
  dynapar::data::dataset d;
  d.labels.resize(4);
  d.target_ids = 2;  // 4 samples of 2 positions
  CHECK(metric_of(3, d) == 3.0 / 8);
}
