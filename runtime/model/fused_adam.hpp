// Adam as torch::optim::Adam defines it (L2 weight decay, no amsgrad), in one pass per
// parameter on the CPU (adam_kernel.hpp) instead of LibTorch 1.13's eight tensor operations
// and their temporaries: on ResNet-18's 11 M parameters 7.7 ms a step against 27 ms on one
// core (docs/BENCHMARKS.md, "Adam in one pass"). Its state is LibTorch's own
// AdamParamState, so checkpoints, migrations and the wire format are unchanged. Anything but
// contiguous float32 CPU tensors (a GPU, amsgrad) takes LibTorch's own step.
#pragma once

#include <torch/optim/adam.h>

#include <memory>
#include <string>

#include "common/mapped_file.hpp"
#include "model/offload.hpp"

namespace dynapar::model {

class fused_adam final : public torch::optim::Adam, public state_in_file {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // The step with each gradient taken as grad / divisor (a summed gradient's mean), divided
  // inside the loop: no pass and no temporary for it. The gradients are only read.
  void step_divided(double divisor);
  // Keep the moments in a file in `dir` (common/mapped_file.hpp) from the next step on: each
  // parameter is updated a slice at a time and each slice's moments let go of at once, so
  // that this process holds at most one slice of them (`--offload-optimizer`,
  // docs/RUNTIME.md). The same bits as in memory: the update is elementwise. Moments that
  // come from elsewhere (a migration, a checkpoint) move into the file at the next step.
  void offload_to(std::string dir) { offload_dir_ = std::move(dir); }
  // Lets go of the moments' pages read since the step (a hash, a copy); a no-op in memory.
  void release_state() const override {
    if (file_) file_->release_all();
  }

 private:
  bool fusable_step() const;
  void lay_out_file();
  torch::Tensor in_file(std::size_t offset, const torch::Tensor& like) const;
  std::string offload_dir_;
  std::shared_ptr<mapped_file> file_;
  std::vector<std::size_t> offsets_;  // by parameter, in group order: its exp_avg; exp_avg_sq follows
};

}  // namespace dynapar::model
