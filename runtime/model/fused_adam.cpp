#include "model/fused_adam.hpp"

#include "model/adam_kernel.hpp"
#include "model/boxes.hpp"

namespace dynapar::model {

namespace {

bool fusable(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous(); }

}  // namespace

torch::Tensor fused_adam::step(LossClosure closure) {
  for (const auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    if (o.amsgrad()) return torch::optim::Adam::step(std::move(closure));
    for (const auto& p : group.params())
      if (p.grad().defined() && !(fusable(p) && fusable(p.grad()))) return torch::optim::Adam::step(std::move(closure));
  }
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
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
      const auto c = adam_step_coefficients(o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), s.step());
      adam_update(p.data_ptr<float>(), s.exp_avg().data_ptr<float>(), s.exp_avg_sq().data_ptr<float>(), p.grad().data_ptr<float>(),
                  p.numel(), c);
    }
  }
  return loss;
}

}  // namespace dynapar::model
