// The optimizers a job may name, against PyTorch's update formulas worked here in double
// precision (torch.optim.AdamW and torch.optim.SGD's documentation), and their state across
// the wire as their own kind. (REQUIRE throughout: LibTorch's glog defines CHECK.)
#include "support/torch_catch.hpp"

#include <cmath>

#include "data/dataset.hpp"
#include "model/api.hpp"
#include "model/boxes.hpp"

using namespace dynapar;
using namespace dynapar::model;

namespace {

// Gradient of step t (from 1) for element i: signs and sizes that change from step to step.
double grad(int t, int i) { return (i % 2 ? -0.5 : 0.75) * (1 + t % 3) + 0.1 * i; }

// Runs `steps` steps of make_optimizer(o) on a 5-element parameter and checks each step
// against `expect(t, p)`, which updates the double-precision copy p for step t.
template <class Expect>
void follows(const optimizer_config& o, int steps, Expect expect) {
  std::vector<double> want = {1.0, -2.0, 0.5, 3.0, -0.25};
  auto p = torch::tensor(std::vector<float>(want.begin(), want.end())).requires_grad_(true);
  auto opt = make_optimizer({p}, o);
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> g;
    for (int i = 0; i < 5; ++i) g.push_back(static_cast<float>(grad(t, i)));
    p.mutable_grad() = torch::tensor(g);
    opt->step();
    expect(t, want);
    for (int i = 0; i < 5; ++i) {
      INFO(o.kind << " step " << t << " element " << i);
      REQUIRE(p[i].item<float>() == Approx(want[i]).epsilon(1e-5).margin(1e-6));
    }
  }
}

}  // namespace

TEST_CASE("AdamW decays the weights apart from the moments, as torch.optim.AdamW", "[unit][optimizer]") {
  const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<double> m(5, 0), v(5, 0);
  follows({"adamw", lr, 0, wd}, 12, [&](int t, std::vector<double>& p) {
    for (int i = 0; i < 5; ++i) {
      p[i] *= 1 - lr * wd;  // decoupled: not through the moments
      const double g = grad(t, i);
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  });
}

TEST_CASE("SGD with Nesterov momentum and weight decay, as torch.optim.SGD", "[unit][optimizer]") {
  const double lr = 0.05, mu = 0.9, wd = 0.01;
  std::vector<double> buf(5, 0);
  optimizer_config o{"sgd", lr, mu, wd};
  o.nesterov = true;
  follows(o, 12, [&](int t, std::vector<double>& p) {
    for (int i = 0; i < 5; ++i) {
      const double d = grad(t, i) + wd * p[i];
      buf[i] = t == 1 ? d : mu * buf[i] + d;  // no dampening; the first step takes the gradient
      p[i] -= lr * (d + mu * buf[i]);
    }
  });
}

TEST_CASE("optimizer settings that PyTorch would refuse or misread are named", "[unit][optimizer]") {
  REQUIRE(check_optimizer({"adamw", 1e-3, 0, 0.01}));
  optimizer_config o{"adam", 1e-3, 0.9, 0};
  o.nesterov = true;
  REQUIRE(check_optimizer(o).err().message.find("nesterov") != std::string::npos);
  o = {"sgd", 1e-3, 0, 0};
  o.nesterov = true;  // Nesterov without momentum: torch.optim.SGD refuses it
  REQUIRE_FALSE(check_optimizer(o));
  REQUIRE(check_optimizer({"lamb", 1e-3, 0.9, 0}).err().message.find("'lamb'") != std::string::npos);
  REQUIRE_FALSE(check_optimizer({"adam", 0, 0.9, 0}));
  REQUIRE_FALSE(check_optimizer({"sgd", 1e-3, -0.5, 0}));
}

TEST_CASE("a layer's AdamW and Nesterov state crosses the wire as what it is", "[unit][optimizer]") {
  auto m = make_model("mlp", 2);
  REQUIRE(m);
  const auto d = data::synthetic(64, 5);
  optimizer_config nesterov{"sgd", 0.05, 0.9, 0};
  nesterov.nesterov = true;
  for (const auto& o : {optimizer_config{"adamw", 1e-3, 0, 0.01}, nesterov}) {
    reference ref(**m, o);
    ref.step(d, {0, 1, 2, 3, 4, 5, 6, 7});
    ref.step(d, {8, 9, 10, 11, 12, 13, 14, 15});
    const auto layers = ref.layers();
    for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
      auto back = from_wire(**m, l, to_wire(layers[l]));
      REQUIRE(back);
      REQUIRE((*back)->states.size() == layers[l]->states.size());
      for (std::size_t i = 0; i < layers[l]->states.size(); ++i) {
        INFO(o.kind << " layer " << l << " parameter " << i);
        if (o.kind == "adamw") {
          const auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(layers[l]->states[i].get());
          const auto* b = dynamic_cast<const torch::optim::AdamWParamState*>((*back)->states[i].get());
          REQUIRE(a);
          REQUIRE(b);  // not Adam's: an AdamW optimizer could not take it
          REQUIRE(a->step() == 2);
          REQUIRE(b->step() == a->step());
          REQUIRE(torch::equal(a->exp_avg(), b->exp_avg()));
          REQUIRE(torch::equal(a->exp_avg_sq(), b->exp_avg_sq()));
        } else {
          const auto* a = dynamic_cast<const torch::optim::SGDParamState*>(layers[l]->states[i].get());
          const auto* b = dynamic_cast<const torch::optim::SGDParamState*>((*back)->states[i].get());
          REQUIRE(a);
          REQUIRE(b);
          REQUIRE(torch::equal(a->momentum_buffer(), b->momentum_buffer()));
        }
      }
    }
  }
}

TEST_CASE("learning-rate schedules: each step's rate by hand, as PyTorch's schedulers give it", "[unit][optimizer]") {
  const double lr = 0.1;
  lr_schedule c;  // constant
  REQUIRE(lr_at(c, lr, 0) == lr);
  REQUIRE(lr_at(c, lr, 1000) == lr);
  lr_schedule s{"step", 0, 0, 3, 0.5, 0};  // StepLR(step_size 3, gamma 0.5)
  const double want_step[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025};
  for (int t = 0; t < 7; ++t) REQUIRE(lr_at(s, lr, t) == Approx(want_step[t]).epsilon(1e-15));
  // Warm-up over 4 steps from lr/5 (LinearLR, start factor 1/5), then cosine over the 6 left
  // down to 0.01: lr(t) = 0.01 + 0.09 (1 + cos(pi (t - 4) / 6)) / 2.
  lr_schedule k{"cosine", 4, 10, 1, 0.1, 0.01};
  const double want_cos[] = {0.02, 0.04, 0.06, 0.08, 0.1, 0.01 + 0.045 * (1 + std::cos(M_PI / 6)), 0.01 + 0.045 * 1.5,
                             0.055, 0.01 + 0.045 * 0.5, 0.01 + 0.045 * (1 + std::cos(5 * M_PI / 6))};
  for (int t = 0; t < 10; ++t) {
    INFO("step " << t);
    REQUIRE(lr_at(k, lr, t) == Approx(want_cos[t]).epsilon(1e-12));
  }
  REQUIRE(lr_at(k, lr, 10) == 0.01);  // past its steps: the floor
  REQUIRE(lr_at(k, lr, 500) == 0.01);
}

TEST_CASE("a device applies the schedule's rate of the training step it is given", "[unit][optimizer]") {
  // Plain SGD: the update is exactly lr(t) x gradient, so the parameter's change says which
  // rate the worker used.
  auto m = make_model("mlp", 3);
  REQUIRE(m);
  optimizer_config o{"sgd", 0.1, 0, 0};
  o.schedule = {"step", 0, 0, 2, 0.5, 0};
  auto w = make_worker(o);
  const auto before = copy_layer(**m, 0);
  w->hold(0, before);
  const auto params = before->module->parameters();
  REQUIRE(sum_entries(before->module) == params.size());  // no running statistics in the MLP's first layer
  std::vector<tensor> ones;
  for (const auto& p : params) ones.push_back(box(torch::ones_like(p)));
  for (std::int64_t t : {0, 5}) {  // rates 0.1 and 0.1 x 0.5^2
    const auto start = w->copy(0)->module->parameters()[0].clone();
    REQUIRE(w->apply(0, ones, 1.0, t, 1.0));
    const auto moved = (start - w->copy(0)->module->parameters()[0]).mean().item<double>();
    REQUIRE(moved == Approx(lr_at(o.schedule, o.lr, t)).epsilon(1e-5));
  }
}

namespace {
// A worker holding every layer of `m` (as a one-device run's last stage), at step 0.
// The mlp and 8 synthetic samples: what the loss tests feed a worker holding every layer.
struct mlp_case {
  data::dataset d = data::synthetic(64, 2);
  std::shared_ptr<const model_chain> m = *make_model("mlp", 4);
  int L = num_layers(*m);
  std::vector<int> samples = {0, 1, 2, 3, 4, 5, 6, 7};
};

std::unique_ptr<device_worker> holding_all(const model_chain& m, const optimizer_config& o) {
  auto w = make_worker(o);
  for (int l = 0; l < num_layers(m); ++l) w->hold(l, copy_layer(m, l));
  w->begin_step(0);
  return w;
}
}  // namespace

TEST_CASE("label smoothing: the last stage's loss is PyTorch's smoothed cross-entropy, worked by hand", "[unit][optimizer]") {
  // -(1 - e) log p_y - e / K sum_k log p_k, summed over the micro-batch (CrossEntropyLoss
  // with label_smoothing e and reduction sum), from the logits in double precision.
  const auto [d, m, L, samples] = mlp_case{};
  for (double e : {0.0, 0.1, 0.4}) {
    optimizer_config o{"sgd", 0.1, 0, 0};
    o.label_smoothing = e;
    auto w = holding_all(*m, o);
    auto out = w->forward(0, 0, L, inputs(d, samples, 0, 8));
    REQUIRE(out);
    const auto y = targets(d, samples, 0, 8);
    REQUIRE(w->backward_from_loss(0, y));
    const auto logits = (*out)->t.to(torch::kFloat64);
    const auto logp = torch::log_softmax(logits, 1);
    const int K = static_cast<int>(logits.size(1));
    double want = 0;
    for (int i = 0; i < 8; ++i) {
      const auto c = y->t[i].item<std::int64_t>();
      want += -(1 - e) * logp[i][c].item<double>() - e / K * logp[i].sum().item<double>();
    }
    INFO("label smoothing " << e);
    REQUIRE(w->loss_sum() == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("loss mse: the last stage's loss is the squared error summed by hand", "[unit][optimizer]") {
  // Real targets (a regression's float32 [n, k]) take the squared error over every value of
  // every sample (MSELoss with reduction sum); class ids keep cross-entropy (above).
  const auto [d, m, L, samples] = mlp_case{};
  auto w = holding_all(*m, optimizer_config{"sgd", 0.1, 0, 0});
  auto out = w->forward(0, 0, L, inputs(d, samples, 0, 8));
  REQUIRE(out);
  torch::manual_seed(3);
  const auto y = box(torch::randn({8, 10}));
  REQUIRE(w->backward_from_loss(0, y));
  const auto o = (*out)->t.to(torch::kFloat64);
  const auto t = y->t.to(torch::kFloat64);
  double want = 0;
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 10; ++k) want += std::pow(o[i][k].item<double>() - t[i][k].item<double>(), 2);
  REQUIRE(w->loss_sum() == Approx(want).epsilon(1e-5));
  // Targets of another width than the output: a named error, not a LibTorch broadcast.
  w->begin_step(1);
  REQUIRE(w->forward(0, 0, L, inputs(d, samples, 0, 8)));
  const auto bad = w->backward_from_loss(0, box(torch::zeros({8, 7})));
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("output 10 values a sample; the regression's targets have 7") != std::string::npos);
}

TEST_CASE("loss next_token: every position's cross-entropy by hand, averaged over the positions and summed over the samples", "[unit][optimizer]") {
  // gpt_lm scores each of a window's 32 positions; the target is the id after each. By hand
  // from the scores in double precision: sum over samples of (1/T) sum over positions of
  // -log softmax(score)[next id].
  auto m = make_model("gpt_lm", 4);
  REQUIRE(m);
  const int L = num_layers(**m);
  auto w = holding_all(**m, optimizer_config{"sgd", 0.1, 0, 0});
  torch::manual_seed(5);
  const auto ids = torch::randint(0, 128, {3, 33}, torch::kInt64);
  auto out = w->forward(0, 0, L, box(ids.slice(1, 0, 32).to(torch::kFloat32).reshape({3, 1, 1, 32})));
  REQUIRE(out);
  REQUIRE((*out)->t.sizes() == torch::IntArrayRef({3, 32, 128}));
  const auto y = box(ids.slice(1, 1, 33).contiguous());
  REQUIRE(w->backward_from_loss(0, y));
  const auto logp = torch::log_softmax((*out)->t.to(torch::kFloat64), 2);
  double want = 0;
  for (int i = 0; i < 3; ++i)
    for (int p = 0; p < 32; ++p) want -= logp[i][p][y->t[i][p].item<std::int64_t>()].item<double>() / 32;
  REQUIRE(w->loss_sum() == Approx(want).epsilon(1e-5));
  // A model that scores the sample once, against every position's targets: named.
  auto cnn = make_model("mlp", 4);
  REQUIRE(cnn);
  auto v = holding_all(**cnn, optimizer_config{"sgd", 0.1, 0, 0});
  REQUIRE(v->forward(0, 0, num_layers(**cnn), box(torch::zeros({3, 1, 28, 28}))));
  const auto bad = v->backward_from_loss(0, box(torch::zeros({3, 32}, torch::kInt64)));
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("the model's output is not [batch, 32, vocab]") != std::string::npos);
}

TEST_CASE("precision bf16: a device's forward is the bfloat16 forward worked by hand, its loss is taken in float32", "[unit][optimizer]") {
  // autocast's rule for a Linear: input, weight and bias cast to bfloat16, then the op. By hand
  // here without autocast, layer by layer; ReLU keeps the type.
  const auto [d, m, L, samples] = mlp_case{};
  optimizer_config o{"sgd", 0.1, 0, 0};
  o.bf16 = true;
  auto w = holding_all(*m, o);
  auto out = w->forward(0, 0, L, inputs(d, samples, 0, 8));
  REQUIRE(out);
  REQUIRE((*out)->t.scalar_type() == torch::kBFloat16);
  torch::Tensor x = inputs(d, samples, 0, 8)->t.flatten(1);
  for (int l = 0; l < L; ++l) {
    auto p = m->layers[l]->parameters();
    REQUIRE(p.size() == 2);
    x = torch::linear(x.to(torch::kBFloat16), p[0].detach().to(torch::kBFloat16), p[1].detach().to(torch::kBFloat16));
    if (l + 1 < L) x = torch::relu(x);
  }
  REQUIRE(torch::equal((*out)->t, x));
  // The float32 forward is another result: autocast was on.
  auto w32 = holding_all(*m, optimizer_config{"sgd", 0.1, 0, 0});
  auto out32 = w32->forward(0, 0, L, inputs(d, samples, 0, 8));
  REQUIRE(out32);
  REQUIRE_FALSE(torch::equal((*out32)->t.to(torch::kBFloat16), x));
  // The loss: cross-entropy of the bf16 scores read as float32, summed, by hand.
  const auto y = targets(d, samples, 0, 8);
  REQUIRE(w->backward_from_loss(0, y));
  const auto logp = torch::log_softmax(x.to(torch::kFloat64), 1);
  double want = 0;
  for (int i = 0; i < 8; ++i) want -= logp[i][y->t[i].item<std::int64_t>()].item<double>();
  REQUIRE(w->loss_sum() == Approx(want).epsilon(1e-5));
  // The gradients are float32, as the parameters.
  const auto parts = w->partial_gradients(0);
  REQUIRE(!parts.empty());
  REQUIRE(parts[0].grads[0]->t.scalar_type() == torch::kFloat32);
}

TEST_CASE("precision bf16: a layer autocast cannot run is refused before training, naming the layer and the setting", "[unit][optimizer]") {
  // LibTorch 1.13's CPU autocast runs a Linear in bfloat16 but leaves LayerNorm to its input's
  // type, and LayerNorm refuses a bf16 input with float32 weights.
  namespace nn = torch::nn;
  model_chain m;
  m.name = "linear_then_norm";
  m.names = {"fc", "norm"};
  m.layers = {nn::Sequential(nn::Flatten(), nn::Linear(784, 8)), nn::Sequential(nn::LayerNorm(nn::LayerNormOptions({8})))};
  optimizer_config o{"sgd", 0.1, 0, 0};
  REQUIRE(measure_profile(m, 2, 1, o, "cpu"));  // float32: runs
  o.bf16 = true;
  const auto p = measure_profile(m, 2, 1, o, "cpu");
  REQUIRE_FALSE(p);
  CHECK(p.err().code == "bad_precision");
  CHECK(p.err().message.find("layer 1 (norm) cannot run under precision: bf16") != std::string::npos);
  CHECK(p.err().message.find("BFloat16") != std::string::npos);  // LibTorch's reason, its last line
}

TEST_CASE("clipping by global norm: the factor LibTorch's clip_grad_norm_ gives, and a worker's step by hand", "[unit][optimizer]") {
  // By hand: gradients (3, 4) and (0) have the global norm 5; bound 1 gives 1 / (5 + 1e-6).
  const std::vector<tensor> hand = {box(torch::tensor({6.0f, 8.0f})), box(torch::tensor({0.0f}))};
  const auto norms = grad_norms(hand, 2.0);  // each sum / 2
  REQUIRE((norms.size() == 2 && norms[0] == 5.0f && norms[1] == 0.0f));
  REQUIRE(clip_scale(norms, 1.0) == Approx(1.0 / (5 + 1e-6)).epsilon(1e-6));
  REQUIRE(clip_scale(norms, 5.5) == 1.0);  // under the bound: untouched
  // Where the 1e-6 matters: total 1e-3, bound 1e-4 gives 1e-4 / (1e-3 + 1e-6), not 0.1.
  REQUIRE(clip_scale({6e-4f, 8e-4f}, 1e-4) == Approx(1e-4 / (1e-3 + 1e-6)).epsilon(1e-5));
  REQUIRE(clip_scale({}, 1.0) == 1.0);
  // Against LibTorch's own clip_grad_norm_ on random gradients of several tensors: the
  // gradients it leaves are ours times our factor, to the last bit of the factor (LibTorch's
  // C++ divides max_norm by the total; Python's, which we follow, multiplies by its reciprocal).
  torch::manual_seed(7);
  std::vector<torch::Tensor> params;
  std::vector<tensor> sums;
  for (const auto& shape : {std::vector<std::int64_t>{4, 3}, {3}, {2, 2, 2}}) {
    auto p = torch::zeros(shape).requires_grad_(true);
    const auto sum = torch::randn(shape) * 40;
    p.mutable_grad() = sum / 8.0;
    params.push_back(p);
    sums.push_back(box(sum));
  }
  for (double bound : {0.5, 3.0, 1e6}) {
    std::vector<torch::Tensor> clipped;
    for (auto& p : params) {
      auto q = torch::zeros_like(p).requires_grad_(true);
      q.mutable_grad() = p.grad().clone();
      clipped.push_back(q);
    }
    torch::nn::utils::clip_grad_norm_(clipped, bound);
    const double scale = clip_scale(grad_norms(sums, 8.0), bound);
    REQUIRE(scale <= 1.0);
    for (std::size_t i = 0; i < params.size(); ++i)
      REQUIRE(torch::allclose(clipped[i].grad(), (sums[i]->t / 8.0).mul_(scale), /*rtol=*/3e-7, /*atol=*/0));
    if (bound == 1e6) REQUIRE(scale == 1.0);
  }
  // A worker's plain SGD step (lr 1) moves each weight by exactly (sum / divisor) x scale.
  auto m = make_model("mlp", 3);
  REQUIRE(m);
  auto w = make_worker(optimizer_config{"sgd", 1.0, 0, 0});
  w->hold(0, copy_layer(**m, 0));
  const auto before = w->copy(0)->module->parameters();
  std::vector<tensor> g;
  for (const auto& p : before) g.push_back(box(torch::full_like(p, 3.0f)));
  REQUIRE(w->apply(0, g, 2.0, 0, 0.25));
  const auto after = w->copy(0)->module->parameters();
  for (std::size_t i = 0; i < before.size(); ++i) REQUIRE(torch::equal(after[i], before[i] - 0.375f));
  optimizer_config bad{"adam", 1e-3, 0, 0};
  bad.clip_grad_norm = -1;
  REQUIRE(check_optimizer(bad).err().message.find("clip_grad_norm") != std::string::npos);
}
