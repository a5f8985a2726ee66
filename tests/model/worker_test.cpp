// Devices on the CPU against the single-device reference: two groups, each a two-stage
// pipeline holding some of the step's micro-batches, add their partial sums in the exact
// sum's tree and train the reference's bits, for every way of splitting the micro-batches;
// `exact: false`'s in-place accumulation gives the same sum up to rounding.
#include <catch2/catch.hpp>

#include "data/sampler.hpp"
#include "data/text.hpp"
#include <cmath>

#include "model/api.hpp"
#include "model/boxes.hpp"
#include "model/channel.hpp"

using namespace dynapar;
using namespace dynapar::model;

namespace {

const optimizer_config adam{"adam", 1e-3, 0.9, 0};

struct group {
  std::unique_ptr<device_worker> a, b;  // stages [0, split) and [split, layers)
};

// One step's forward and backward over groups: group g runs micro-batches [cuts[g],
// cuts[g+1]) of the step (micro-batches of `micro` samples). Returns each layer's sum of its
// holders' partial sums, added in the tree.
std::vector<std::vector<tensor>> sums(std::vector<group>& gs, int split, int layers, const data::dataset& d, const std::vector<int>& samples,
                                      int micro, const std::vector<int>& cuts, bool accumulate) {
  for (std::size_t g = 0; g < gs.size(); ++g) {
    gs[g].a->begin_step(0, cuts[g], accumulate);
    gs[g].b->begin_step(0, cuts[g], accumulate);
    for (int m = cuts[g]; m < cuts[g + 1]; ++m) {
      const int lo = m * micro, hi = lo + micro, i = m - cuts[g];
      auto y = gs[g].a->forward(i, 0, split, inputs(d, samples, lo, hi));
      REQUIRE(y);
      REQUIRE(gs[g].b->forward(i, split, layers, *y));
      auto grad = gs[g].b->backward_from_loss(i, targets(d, samples, lo, hi));
      REQUIRE(grad);
      REQUIRE(gs[g].a->backward(i, *grad));
    }
  }
  std::vector<std::vector<tensor>> out;
  for (int l = 0; l < layers; ++l) {
    std::vector<grad_part> parts;
    for (auto& g : gs)
      for (auto& p : (l < split ? g.a : g.b)->partial_gradients(l)) parts.push_back(std::move(p));
    auto sum = accumulate ? holders_sum(std::move(parts)) : tree_sum(std::move(parts), static_cast<std::int64_t>(cuts.back()));
    REQUIRE(sum);
    out.push_back(std::move(*sum));
  }
  return out;
}

std::vector<group> groups_of(const model_chain& m, std::size_t n, const optimizer_config& opt) {
  const int layers = num_layers(m), split = layers / 2;
  std::vector<group> gs(n);
  for (auto& g : gs) {
    g.a = make_worker(opt);
    g.b = make_worker(opt);
    for (int l = 0; l < layers; ++l) (l < split ? g.a : g.b)->hold(l, copy_layer(m, l));
  }
  return gs;
}

std::vector<layer_copy> train(const model_chain& m, const data::dataset& d, int micro, const std::vector<int>& cuts, int steps,
                              const optimizer_config& opt = adam) {
  const int layers = num_layers(m), split = layers / 2;
  auto gs = groups_of(m, cuts.size() - 1, opt);
  const int batch = cuts.back() * micro;
  data::global_sampler sampler(d.size(), batch, 7);
  for (int t = 0; t < steps; ++t) {
    const auto summed = sums(gs, split, layers, d, sampler.step_samples(t), micro, cuts, false);
    for (int l = 0; l < layers; ++l)
      for (auto& g : gs) REQUIRE((l < split ? g.a : g.b)->apply(l, summed[l], batch, 0, 1.0));
  }
  std::vector<layer_copy> out;
  for (int l = 0; l < layers; ++l) out.push_back((l < split ? gs[0].a : gs[0].b)->copy(l));
  return out;
}

}  // namespace

TEST_CASE("groups adding partial sums in the tree train the reference's bits, however the micro-batches are split", "[model]") {
  const auto d = data::synthetic(512, 3);
  auto m = make_model("cnn", 5);
  REQUIRE(m);
  const int micro = 4, steps = 3;
  for (const auto& cuts : std::vector<std::vector<int>>{{0, 11}, {0, 5, 11}, {0, 3, 4, 11}, {0, 1, 8, 9, 11}}) {
    INFO("groups " << cuts.size() - 1 << ", first cut " << cuts[1]);
    reference ref(**m, adam);
    data::global_sampler sampler(d.size(), cuts.back() * micro, 7);
    for (int t = 0; t < steps; ++t) ref.step(d, sampler.step_samples(t), micro);
    CHECK(max_rel_diff(train(**m, d, micro, cuts, steps), ref.layers()) == 0.0);
  }
}

// Text (docs/FORMATS.md, data: fortunes): the decoder looks token ids up, so its first stage
// takes no input gradient; split over a pipeline and two groups it still trains one device's bits.
TEST_CASE("the GPT on text windows, pipelined over two groups, trains the reference's bits", "[model]") {
  const auto d = data::load_text(data::fortunes_dir, "test");
  REQUIRE(d);
  auto m = make_model("gpt_text", 5);
  REQUIRE(m);
  REQUIRE(check_data(**m, *d));
  const int micro = 2, steps = 2;
  const std::vector<int> cuts = {0, 2, 3};
  reference ref(**m, adam);
  data::global_sampler sampler(d->size(), cuts.back() * micro, 7);
  for (int t = 0; t < steps; ++t) ref.step(*d, sampler.step_samples(t), micro);
  CHECK(max_rel_diff(train(**m, *d, micro, cuts, steps), ref.layers()) == 0.0);
}

// Mixed precision (precision: bf16): every forward under autocast to bfloat16, so the
// activations between the stages are bf16 too. The exact sum still makes the run
// plan-independent: the bf16 reference's bits, however the micro-batches are split. It is
// not the float32 run (autocast took effect; how near it stays is a matter of losses:
// own_data.sh).
TEST_CASE("precision bf16: pipelined over groups, trains the bf16 reference's bits, not the float32 one's", "[model]") {
  const auto d = data::synthetic(512, 3);
  auto m = make_model("cnn", 5);
  REQUIRE(m);
  const int micro = 4, steps = 3;
  optimizer_config bf16 = adam;
  bf16.bf16 = true;
  reference ref(**m, bf16), ref32(**m, adam);
  data::global_sampler sampler(d.size(), 11 * micro, 7);
  for (int t = 0; t < steps; ++t) {
    ref.step(d, sampler.step_samples(t), micro);
    ref32.step(d, sampler.step_samples(t), micro);
  }
  for (const auto& cuts : std::vector<std::vector<int>>{{0, 11}, {0, 5, 11}, {0, 1, 8, 9, 11}}) {
    INFO("groups " << cuts.size() - 1 << ", first cut " << cuts[1]);
    const auto layers = train(**m, d, micro, cuts, steps, bf16);
    CHECK(max_rel_diff(layers, ref.layers()) == 0.0);
    CHECK(max_rel_diff(layers, ref32.layers()) > 0);
  }
}

TEST_CASE("a layer dropped between a micro-batch's forward and its backward: the backward is refused, the next step runs",
          "[model]") {
  // A backward of an abandoned attempt may reach a device after a migration took one of its
  // layers: it once left an empty layer behind, and the next step's zero_grad crashed
  // (SIGSEGV in cli.hard_moments, a kill at a re-plan).
  auto m = make_model("cnn", 5);
  REQUIRE(m);
  const auto d = data::synthetic(64, 3);
  data::global_sampler sampler(d.size(), 16, 7);
  const auto samples = sampler.step_samples(0);
  const int layers = num_layers(**m);
  auto w = make_worker(adam);
  for (int l = 0; l < layers; ++l) w->hold(l, copy_layer(**m, l));
  w->begin_step(0, 0, false);
  REQUIRE(w->forward(0, 0, layers, inputs(d, samples, 0, 16)));
  w->drop(layers - 1);
  auto lost = w->backward_from_loss(0, targets(d, samples, 0, 16));
  REQUIRE_FALSE(lost);
  CHECK(lost.err().code == "no_forward");
  CHECK_FALSE(w->holds(layers - 1));
  // The next step, over the layers still held, runs.
  w->begin_step(1, 0, false);
  auto y = w->forward(0, 0, layers - 1, inputs(d, samples, 0, 16));
  REQUIRE(y);
  CHECK(w->backward(0, *y));  // any gradient of the output's shape
}

TEST_CASE("a model and data of another kind are refused, naming both", "[model]") {
  const auto images = data::synthetic(16, 1);
  auto text_model = make_model("gpt_text", 1), image_model = make_model("cnn", 1);
  REQUIRE(text_model);
  REQUIRE(image_model);
  CHECK(check_data(**image_model, images));
  const auto st = check_data(**text_model, images);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.err().message, Catch::Contains("takes text windows of 32 tokens in 128 classes") && Catch::Contains("the data are images of [1, 28, 28] in 10 classes"));
  data::dataset text = images;
  text.rows = 1;
  text.cols = 32;
  text.classes = 128;
  text.tokens = true;
  CHECK(check_data(**text_model, text));
  CHECK_FALSE(check_data(**image_model, text));
}

TEST_CASE("exact: false's in-place accumulation sums the same gradients up to rounding", "[model]") {
  const auto d = data::synthetic(512, 3);
  auto m = make_model("mlp", 5);
  REQUIRE(m);
  const std::vector<int> cuts{0, 5, 11};
  const int layers = num_layers(**m), micro = 4;
  data::global_sampler sampler(d.size(), cuts.back() * micro, 7);
  const auto samples = sampler.step_samples(0);
  auto ga = groups_of(**m, 2, adam), gb = groups_of(**m, 2, adam);
  const auto exact = sums(ga, layers / 2, layers, d, samples, micro, cuts, false);
  const auto inexact = sums(gb, layers / 2, layers, d, samples, micro, cuts, true);
  for (int l = 0; l < layers; ++l) {
    REQUIRE(exact[l].size() == inexact[l].size());
    for (std::size_t i = 0; i < exact[l].size(); ++i) {
      const auto a = values_of(exact[l][i]), b = values_of(inexact[l][i]);
      REQUIRE(a.size() == b.size());
      float scale = 0, diff = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        scale = std::max(scale, std::abs(a[k]));
        diff = std::max(diff, std::abs(a[k] - b[k]));
      }
      INFO("layer " << l << ", parameter " << i << ": max |exact - accumulated| " << diff << " of max |exact| " << scale);
      CHECK(scale > 0);
      CHECK(diff <= 1e-5f * scale);
    }
  }
}

// Evaluation on the devices (issue 50): a pipeline's infer, chunk by chunk and scored, gives
// what accuracy() gives on copies of the layers, in evaluation mode (BatchNorm's running
// statistics, no dropout), and leaves training exactly as it was.
TEST_CASE("infer over a pipeline scores as accuracy() on the layers' copies, and training goes on as without it", "[model]") {
  torch::manual_seed(3);
  const std::vector<layer_copy> model{
      std::make_shared<layer_box>(layer_box{torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 16), torch::nn::BatchNorm1d(16), torch::nn::ReLU()), {}, {}}),
      std::make_shared<layer_box>(layer_box{torch::nn::Sequential(torch::nn::Dropout(0.5), torch::nn::Linear(16, 10)), {}, {}})};
  const auto d = data::synthetic(256, 3), test = data::synthetic(300, 4);
  auto pipeline = [&] {
    std::vector<group> gs(1);
    gs[0].a = make_worker(adam);
    gs[0].b = make_worker(adam);
    gs[0].a->hold(0, model[0]);
    gs[0].b->hold(1, model[1]);
    return gs;
  };
  auto evaluated = pipeline(), plain = pipeline();
  data::global_sampler sampler(d.size(), 32, 7);
  auto step = [&](std::vector<group>& gs, std::int64_t t) {
    torch::manual_seed(100 + t);  // a plain Dropout draws from torch's generator: the same masks for both
    const auto summed = sums(gs, 1, 2, d, sampler.step_samples(t), 8, {0, 4}, false);
    REQUIRE(gs[0].a->apply(0, summed[0], 32, t, 1.0));
    REQUIRE(gs[0].b->apply(1, summed[1], 32, t, 1.0));
  };
  step(evaluated, 0);
  step(plain, 0);
  std::vector<int> all(test.size());
  for (int i = 0; i < test.size(); ++i) all[i] = i;
  double sum = 0;
  for (int lo = 0; lo < test.size(); lo += evaluation_chunk) {
    const int hi = std::min(test.size(), lo + evaluation_chunk);
    auto y = evaluated[0].a->infer(0, 1, inputs(test, all, lo, hi));
    REQUIRE(y);
    auto z = evaluated[0].b->infer(1, 2, *y);
    REQUIRE(z);
    auto again = evaluated[0].b->infer(1, 2, *y);  // no dropout: the same outputs
    REQUIRE(again);
    CHECK(torch::equal((*z)->t, (*again)->t));
    auto sc = score(*z, targets(test, all, lo, hi));
    REQUIRE(sc);
    sum += *sc;
  }
  const std::vector<layer_copy> copies{evaluated[0].a->copy(0), evaluated[0].b->copy(1)};
  CHECK(metric_of(sum, test) == accuracy(copies, test));
  CHECK(metric_of(sum, test) > 0);
  // The BatchNorm's running statistics and the modules' training mode are as they were: the
  // next step's bits are those of the pipeline that never evaluated.
  CHECK(max_rel_diff(copies, {plain[0].a->copy(0), plain[0].b->copy(1)}) == 0.0);
  step(evaluated, 1);
  step(plain, 1);
  CHECK(max_rel_diff({evaluated[0].a->copy(0), evaluated[0].b->copy(1)}, {plain[0].a->copy(0), plain[0].b->copy(1)}) == 0.0);
  // A device hashes a layer's whole state in place as state_hashes hashes its copy, optimizer
  // state included: before its first step (none) and after.
  for (auto* w : {evaluated[0].a.get(), plain[0].a.get()}) CHECK(w->hash(0) == state_hashes({w->copy(0)}).front());
  auto fresh = make_worker(adam);
  fresh->hold(0, model[0]);
  CHECK(fresh->hash(0) == state_hashes({fresh->copy(0)}).front());
  CHECK(fresh->hash(0) != evaluated[0].a->hash(0));
  // A layer not held is an error, not a crash.
  CHECK_FALSE(evaluated[0].a->infer(0, 2, inputs(test, all, 0, 4)));
}
