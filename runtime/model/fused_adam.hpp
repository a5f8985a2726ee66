// Adam as torch::optim::Adam defines it (L2 weight decay, no amsgrad), in one pass per
// parameter on the CPU (adam_kernel.hpp) instead of LibTorch 1.13's eight tensor operations
// and their temporaries: on ResNet-18's 11 M parameters 7.7 ms a step against 27 ms on one
// core (docs/BENCHMARKS.md, "Adam in one pass"). Its state is LibTorch's own
// AdamParamState, so checkpoints, migrations and the wire format are unchanged. Anything but
// contiguous float32 CPU tensors (a GPU, amsgrad) takes LibTorch's own step.
#pragma once

#include <torch/optim/adam.h>

namespace dynapar::model {

class fused_adam final : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // The step with each gradient taken as grad / divisor (a summed gradient's mean), divided
  // inside the loop: no pass and no temporary for it. The gradients are only read.
  void step_divided(double divisor);

 private:
  bool fusable_step() const;
};

}  // namespace dynapar::model
