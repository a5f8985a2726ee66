#include "model/fused_adam.hpp"

#include "model/adam_kernel.hpp"
#include "model/boxes.hpp"

namespace dynapar::model {

namespace {

bool fusable(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous(); }

}  // namespace

bool fused_adam::fusable_step() const {
  for (const auto& group : param_groups()) {
    if (static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params())
      if (p.grad().defined() && !(fusable(p) && fusable(p.grad()))) return false;
  }
  return true;
}

torch::Tensor fused_adam::step(LossClosure closure) {
  if (!fusable_step()) return torch::optim::Adam::step(std::move(closure));
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  step_divided(1);
  return loss;
}

void fused_adam::step_divided(double divisor) {
  torch::NoGradGuard no_grad;
  if (!fusable_step()) {  // LibTorch's division (out of place: the sums may be shared) and step
    for (auto& group : param_groups())
      for (auto& p : group.params())
        if (p.grad().defined()) p.mutable_grad() = p.grad() / divisor;
    torch::optim::Adam::step();
    return;
  }
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state()[state_key(p)];
      if (!slot) {  // as LibTorch's Adam: zero moments on the first step
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      // Moments that came from elsewhere (a checkpoint, a migration) may be laid out apart.
      if (!fusable(s.exp_avg())) s.exp_avg(s.exp_avg().contiguous().to(torch::kFloat));
      if (!fusable(s.exp_avg_sq())) s.exp_avg_sq(s.exp_avg_sq().contiguous().to(torch::kFloat));
      s.step(s.step() + 1);
      const auto c = adam_step_coefficients(o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), s.step(), divisor);
      adam_update(p.data_ptr<float>(), s.exp_avg().data_ptr<float>(), s.exp_avg_sq().data_ptr<float>(), p.grad().data_ptr<float>(),
                  p.numel(), c);
    }
  }
}

}  // namespace dynapar::model
