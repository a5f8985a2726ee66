// The optimizers a job may name, against PyTorch's update formulas worked here in double
// precision (torch.optim.AdamW and torch.optim.SGD's documentation), and their state across
// the wire as their own kind. (REQUIRE throughout: LibTorch's glog defines CHECK.)
#include <catch2/catch.hpp>
#include <torch/torch.h>

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
