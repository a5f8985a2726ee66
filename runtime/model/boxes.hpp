// The torch side of api.hpp's opaque types. Included by torch translation units only.
#pragma once

#include <torch/torch.h>

#include <sstream>
#include <type_traits>

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
  model_io io;
};

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params, const optimizer_config& opt);
// One optimizer step on summed gradients: gradient = sum / divisor, then the step. Every
// device and the reference step this way, so that the bits agree. The sums are only read
// (a sum may be shared between devices of one process).
void step_on_sums(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& sums,
                  double divisor);

// Deep copies of optimizer state (SGD momentum buffers, Adam moments), so that a layer moves
// with its state and training goes on bit for bit.
// Copies onto `to` (a new storage even where the device is the same).
std::unique_ptr<torch::optim::OptimizerParamState> copy_state(const torch::optim::OptimizerParamState& s, const torch::Device& to);

// An optimizer's state is keyed by its parameter: LibTorch 1.x keys by the TensorImpl's
// address printed as a string, 2.x by the address itself. Either LibTorch builds dynapar.
using state_key_t = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
template <class Key = state_key_t>
Key state_key(const torch::Tensor& param) {
  void* impl = param.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << impl;
    return s.str();
  } else {
    return impl;
  }
}

// a + b per parameter, in a's storage (the exact sum's merge of two sibling nodes; a is the
// caller's own). The same bits as a + b out of place.
inline std::vector<torch::Tensor> add_in_place(std::vector<torch::Tensor> a, const std::vector<torch::Tensor>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) a[i].add_(b[i].to(a[i].device()));
  return a;
}

// A place ("cpu", "cuda:N") as a torch device; check_place (api.hpp) said it is usable.
torch::Device device_of(const std::string& place);
// Waits for the device's queued work (timing on a GPU); nothing on the CPU.
void synchronize(const torch::Device& d);
// Where a layer's parameters are (the CPU for a layer without any).
torch::Device device_of(const torch::nn::Sequential& layer);

}  // namespace dynapar::model
