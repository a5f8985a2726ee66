// A user's TorchScript model as a chain of layers (docs/MODELS.md). Torch translation units only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/api.hpp"

namespace dynapar::model {

// Loads `path` and checks, on a seeded sample input, that running its top-level children in
// order gives its own forward bit for bit, that each child runs as a pipeline stage would (its
// input a leaf that requires grad), that nothing is kept on the top module outside its
// children, and that it gives class scores [batch, classes]. Otherwise an error ("bad_model")
// naming the child and pointing to tools/export/dynapar_export.py. Dropout inside a layer is
// drawn from `seed`, the step, the micro-batch and the layer (set_draws).
result<std::shared_ptr<const model_chain>> load_torchscript(const std::string& path, std::uint64_t seed);

// The file `source` with its layers' parameters and buffers from `layers` (trained), as a
// TorchScript file PyTorch loads (torch.jit.load).
status save_torchscript(const std::string& source, const std::vector<std::string>& names, const std::vector<layer_copy>& layers,
                        const std::string& path);

// Which step and micro-batch of it the calling thread computes: a scripted layer that draws
// random numbers in training (dropout) seeds them from these, so that its draws are the same
// on whatever device and thread the micro-batch runs.
void set_draws(std::int64_t step, std::int64_t micro);

}  // namespace dynapar::model
