// Optimizer state kept in a file between steps (`--offload-optimizer`, docs/RUNTIME.md) for
// LibTorch's own AdamW and SGD with momentum (fused_adam keeps Adam's moments its own way).
// After each step every state tensor (AdamW's two moments, SGD's momentum buffer) lives in
// one file of the process's (common/mapped_file.hpp) and its pages are let go of; the next
// step's in-place updates (mul_, add_, addcmul_) write the file where they read it. The same
// bits as in memory: the state is copied, never recomputed.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <string>
#include <vector>

#include "common/mapped_file.hpp"

namespace dynapar::model {

// An optimizer whose state may be in a file: what a hash or a copy that read it lets go of.
class state_in_file {
 public:
  virtual ~state_in_file() = default;
  virtual void release_state() const = 0;
};

// The file's side of an offloaded optimizer: each parameter's state tensors in slots of
// whole pages, laid out at the first step that made them.
class state_file {
 public:
  explicit state_file(std::string dir) : dir_(std::move(dir)) {}
  // Moves every state tensor of `opt` into the file (those already there stay), then lets go
  // of their pages.
  void keep(torch::optim::Optimizer& opt);
  void release() const {
    if (file_) file_->release_all();
  }

 private:
  std::string dir_;
  std::shared_ptr<mapped_file> file_;
  std::vector<std::size_t> offsets_;  // by state tensor, in parameter order
};

template <class Base, class Options>
class offloaded final : public Base, public state_in_file {
 public:
  offloaded(std::vector<torch::Tensor> params, Options o, std::string dir) : Base(std::move(params), o), file_(std::move(dir)) {}
  torch::Tensor step(typename Base::LossClosure closure = nullptr) override {
    auto loss = Base::step(std::move(closure));
    file_.keep(*this);
    return loss;
  }
  void release_state() const override { file_.release(); }

 private:
  state_file file_;
};

using offloaded_adamw = offloaded<torch::optim::AdamW, torch::optim::AdamWOptions>;
using offloaded_sgd = offloaded<torch::optim::SGD, torch::optim::SGDOptions>;

}  // namespace dynapar::model
