// The torch side of api.hpp's opaque types. Included by torch translation units only.
#pragma once

#include <torch/torch.h>

#include "model/api.hpp"

namespace dynapar::model {

struct tensor_box {
  torch::Tensor t;
};

struct layer_box {
  torch::nn::Sequential module;
  // The optimizer's state of each parameter (same order as module->parameters()); empty for
  // a layer that never trained. Deep copies: the box owns them.
  std::vector<std::unique_ptr<torch::optim::OptimizerParamState>> states;
};

inline tensor box(torch::Tensor t) { return std::make_shared<tensor_box>(tensor_box{std::move(t)}); }

inline torch::nn::Sequential deep_copy(const torch::nn::Sequential& s) {
  return torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(s->clone()));
}

class model_chain {
 public:
  std::string name;
  std::vector<std::string> names;
  std::vector<torch::nn::Sequential> layers;
};

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params, const optimizer_config& opt);

// Deep copies of optimizer state (SGD momentum buffers, Adam moments), so that a layer moves
// with its state and training goes on bit for bit.
std::unique_ptr<torch::optim::OptimizerParamState> copy_state(const torch::optim::OptimizerParamState& s);
std::string state_key(const torch::Tensor& param);

}  // namespace dynapar::model
