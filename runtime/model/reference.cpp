// The single-device reference: a plain LibTorch training loop over the whole model.
#include "model/boxes.hpp"

namespace dynapar::model {

struct reference::impl {
  std::vector<torch::nn::Sequential> layers;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

reference::reference(const model_chain& m, const optimizer_config& opt) : impl_(std::make_unique<impl>()) {
  std::vector<torch::Tensor> params;
  for (const auto& l : m.layers) {
    impl_->layers.push_back(deep_copy(l));
    for (const auto& p : impl_->layers.back()->parameters()) params.push_back(p);
  }
  impl_->optimizer = make_optimizer(params, opt);
}

reference::~reference() = default;

double reference::step(const data::dataset& d, const std::vector<int>& samples) {
  impl_->optimizer->zero_grad();
  torch::Tensor x = inputs(d, samples, 0, static_cast<int>(samples.size()))->t;
  for (auto& l : impl_->layers) x = l->forward(x);
  auto loss = torch::nn::functional::cross_entropy(x, targets(d, samples, 0, static_cast<int>(samples.size()))->t);
  loss.backward();
  impl_->optimizer->step();
  return loss.item<double>();
}

std::vector<layer_copy> reference::layers() const {
  std::vector<layer_copy> out;
  for (const auto& l : impl_->layers) out.push_back(std::make_shared<layer_box>(layer_box{deep_copy(l)}));
  return out;
}

}  // namespace dynapar::model
