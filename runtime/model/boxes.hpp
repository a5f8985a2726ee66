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

}  // namespace dynapar::model
