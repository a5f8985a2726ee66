#include "model/fused_adam.hpp"

#include "model/adam_kernel.hpp"
#include "model/boxes.hpp"

#include <algorithm>
#include <stdexcept>

namespace dynapar::model {

namespace {

bool fusable(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous(); }

// A slice of 4 Mi values (16 MB a moment): what an offloaded step holds of the moments at once.
constexpr std::int64_t offload_slice = std::int64_t{1} << 22;

}  // namespace

void fused_adam::lay_out_file() {
  std::size_t at = 0;
  for (const auto& group : param_groups())
    for (const auto& p : group.params()) {
      offsets_.push_back(at);
      at += 2 * mapped_file::whole_pages(static_cast<std::size_t>(p.numel()) * sizeof(float));
    }
  auto f = mapped_file::create(offload_dir_, at);
  if (!f) throw std::runtime_error(f.err().message);  // guarded: the device's error
  file_ = std::move(*f);
}

torch::Tensor fused_adam::in_file(std::size_t offset, const torch::Tensor& like) const {
  // The tensor keeps the mapping alive: a copy of the state may outlive this optimizer.
  return torch::from_blob(file_->data() + offset, like.sizes(), [keep = file_](void*) {}, torch::TensorOptions(torch::kFloat));
}

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
  if (!offload_dir_.empty() && !file_) lay_out_file();
  std::size_t index = 0;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      const auto i = index++;
      if (!p.grad().defined()) continue;
      const auto m_at = file_ ? offsets_[i] : 0, v_at = m_at + mapped_file::whole_pages(static_cast<std::size_t>(p.numel()) * sizeof(float));
      auto& slot = state()[state_key(p)];
      if (!slot) {  // as LibTorch's Adam: zero moments on the first step (a new file reads as zeros)
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->exp_avg(file_ ? in_file(m_at, p) : torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        s->exp_avg_sq(file_ ? in_file(v_at, p) : torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      // Moments that came from elsewhere (a checkpoint, a migration) may be laid out apart.
      if (!fusable(s.exp_avg())) s.exp_avg(s.exp_avg().contiguous().to(torch::kFloat));
      if (!fusable(s.exp_avg_sq())) s.exp_avg_sq(s.exp_avg_sq().contiguous().to(torch::kFloat));
      if (file_ && s.exp_avg().data_ptr() != file_->data() + m_at) s.exp_avg(in_file(m_at, p).copy_(s.exp_avg()));
      if (file_ && s.exp_avg_sq().data_ptr() != file_->data() + v_at) s.exp_avg_sq(in_file(v_at, p).copy_(s.exp_avg_sq()));
      s.step(s.step() + 1);
      const auto c = adam_step_coefficients(o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), s.step(), divisor);
      float *w = p.data_ptr<float>(), *m = s.exp_avg().data_ptr<float>(), *v = s.exp_avg_sq().data_ptr<float>();
      const float* g = p.grad().data_ptr<float>();
      const std::int64_t n = p.numel(), slice = file_ ? offload_slice : std::max<std::int64_t>(n, 1);
      for (std::int64_t at = 0; at < n; at += slice) {
        const auto k = std::min(slice, n - at);
        adam_update(w + at, m + at, v + at, g + at, k, c);
        if (file_) file_->release(m + at, static_cast<std::size_t>(k) * sizeof(float)), file_->release(v + at, static_cast<std::size_t>(k) * sizeof(float));
      }
    }
  }
}

}  // namespace dynapar::model
