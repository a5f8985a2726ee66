// The single-device reference: a plain LibTorch training loop over the whole model.
#include "model/boxes.hpp"
#include "model/scripted.hpp"
#include "schedule/reduction_tree.hpp"

namespace dynapar::model {

struct reference::impl {
  std::vector<torch::nn::Sequential> layers;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::Device device{torch::kCPU};
  optimizer_config opt;  // its schedule gives each step's rate
};

reference::reference(const model_chain& m, const optimizer_config& opt, const std::string& place) : impl_(std::make_unique<impl>()) {
  impl_->device = device_of(place);
  std::vector<torch::Tensor> params;
  for (int l = 0; l < num_layers(m); ++l) {
    impl_->layers.push_back(layer_module(m, l));
    impl_->layers.back()->to(impl_->device);
    for (const auto& p : impl_->layers.back()->parameters()) params.push_back(p);
  }
  impl_->optimizer = make_optimizer(params, opt);
  impl_->opt = opt;
}

reference::~reference() = default;

double reference::step(const data::dataset& d, const std::vector<int>& samples, int micro_batch, std::int64_t step) {
  impl_->optimizer->zero_grad();
  const int n = static_cast<int>(samples.size());
  const int u = micro_batch > 0 ? micro_batch : n;
  // Added up on the device and read once: a read per micro-batch would stall a GPU.
  auto loss_sum = torch::zeros({}, torch::TensorOptions(torch::kFloat64).device(impl_->device));
  std::vector<torch::Tensor> params;
  std::vector<std::vector<torch::Tensor>> start;  // each layer's running statistics (model/boxes.hpp)
  for (auto& l : impl_->layers) {
    for (auto& p : l->parameters()) params.push_back(p);
    start.push_back(snapshot(l));
  }
  // Each micro-batch's gradients taken out and added in the exact sum's fixed tree, as a run
  // over any plan adds them (schedule/reduction_tree.hpp).
  schedule::partial_sums<std::vector<torch::Tensor>> partial;
  std::int64_t micro = 0;
  for (int lo = 0; lo < n; lo += u, ++micro) {
    const int hi = std::min(n, lo + u);
    torch::Tensor x = inputs(d, samples, lo, hi, step)->t.to(impl_->device);
    set_draws(step, micro);
    std::vector<torch::Tensor> running;  // after the gradients, in the same tree
    {
      autocast_scope mixed(impl_->opt.bf16, impl_->device.type());  // the forward only, as a device's
      for (std::size_t l = 0; l < impl_->layers.size(); ++l) {
        x = impl_->layers[l]->forward(x);
        for (auto& t : take_running(impl_->layers[l], start[l])) running.push_back(std::move(t));
      }
    }
    auto loss = model::loss_sum(x, targets(d, samples, lo, hi)->t.to(impl_->device), impl_->opt.label_smoothing);
    loss.backward();
    loss_sum += loss.detach().to(torch::kFloat64);
    std::vector<torch::Tensor> grads;
    for (auto& p : params) {
      grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
      p.mutable_grad() = torch::Tensor();
    }
    for (auto& t : running) grads.push_back(std::move(t));
    partial.add_leaf(micro, std::move(grads), add_in_place);
  }
  auto summed = schedule::evaluate_tree(partial.take(), micro, add_in_place);
  std::size_t at = params.size();
  for (std::size_t l = 0; l < impl_->layers.size(); ++l) {
    const std::size_t k = start[l].empty() ? 0 : start[l].size() + 1;
    if (k) set_running(impl_->layers[l], summed->data() + at, k);
    at += k;
  }
  summed->resize(params.size());
  double scale = 1;
  if (impl_->opt.clip_grad_norm > 0) {  // every parameter in layer order, as the driver gathers them
    std::vector<tensor> boxed;
    for (const auto& g : *summed) boxed.push_back(box(g));
    scale = clip_scale(grad_norms(boxed, static_cast<double>(n)), impl_->opt.clip_grad_norm);
  }
  step_on_sums(*impl_->optimizer, params, *summed, static_cast<double>(n), lr_at(impl_->opt.schedule, impl_->opt.lr, step), scale);
  return loss_sum.item<double>() / n;
}

std::vector<layer_copy> reference::layers() const {
  std::vector<layer_copy> out;
  for (const auto& l : impl_->layers) {
    auto box = std::make_shared<layer_box>(layer_box{deep_copy(l), {}, {}});
    for (const auto& p : l->parameters()) {  // with the optimizer's state, as a device's copy has it
      auto it = impl_->optimizer->state().find(state_key(p));
      box->states.push_back(it == impl_->optimizer->state().end() ? nullptr : copy_state(*it->second, impl_->device));
    }
    out.push_back(std::move(box));
  }
  return out;
}

}  // namespace dynapar::model
