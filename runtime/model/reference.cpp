// The single-device reference: a plain LibTorch training loop over the whole model.
#include "model/boxes.hpp"
#include "schedule/reduction_tree.hpp"

namespace dynapar::model {

struct reference::impl {
  std::vector<torch::nn::Sequential> layers;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::Device device{torch::kCPU};
};

reference::reference(const model_chain& m, const optimizer_config& opt, const std::string& place) : impl_(std::make_unique<impl>()) {
  impl_->device = device_of(place);
  std::vector<torch::Tensor> params;
  for (const auto& l : m.layers) {
    impl_->layers.push_back(deep_copy(l));
    impl_->layers.back()->to(impl_->device);
    for (const auto& p : impl_->layers.back()->parameters()) params.push_back(p);
  }
  impl_->optimizer = make_optimizer(params, opt);
}

reference::~reference() = default;

double reference::step(const data::dataset& d, const std::vector<int>& samples, int micro_batch) {
  impl_->optimizer->zero_grad();
  const int n = static_cast<int>(samples.size());
  const int u = micro_batch > 0 ? micro_batch : n;
  // Added up on the device and read once: a read per micro-batch would stall a GPU.
  auto loss_sum = torch::zeros({}, torch::TensorOptions(torch::kFloat64).device(impl_->device));
  std::vector<torch::Tensor> params;
  for (auto& l : impl_->layers)
    for (auto& p : l->parameters()) params.push_back(p);
  // Each micro-batch's gradients taken out and added in the exact sum's fixed tree, as a run
  // over any plan adds them (schedule/reduction_tree.hpp).
  schedule::partial_sums<std::vector<torch::Tensor>> partial;
  std::int64_t micro = 0;
  for (int lo = 0; lo < n; lo += u, ++micro) {
    const int hi = std::min(n, lo + u);
    torch::Tensor x = inputs(d, samples, lo, hi)->t.to(impl_->device);
    for (auto& l : impl_->layers) x = l->forward(x);
    auto loss = torch::nn::functional::cross_entropy(x, targets(d, samples, lo, hi)->t.to(impl_->device),
                                                     torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    loss.backward();
    loss_sum += loss.detach().to(torch::kFloat64);
    std::vector<torch::Tensor> grads;
    for (auto& p : params) {
      grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
      p.mutable_grad() = torch::Tensor();
    }
    partial.add_leaf(micro, std::move(grads), add_in_place);
  }
  auto summed = schedule::evaluate_tree(partial.take(), micro, add_in_place);
  step_on_sums(*impl_->optimizer, params, *summed, static_cast<double>(n));
  return loss_sum.item<double>() / n;
}

std::vector<layer_copy> reference::layers() const {
  std::vector<layer_copy> out;
  for (const auto& l : impl_->layers) out.push_back(std::make_shared<layer_box>(layer_box{deep_copy(l), {}}));
  return out;
}

}  // namespace dynapar::model
