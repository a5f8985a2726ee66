// The torch side of api.hpp's opaque types. Included by torch translation units only.
#pragma once

#include <mutex>
#include <optional>

#include <ATen/autocast_mode.h>
#include <c10/util/strides.h>
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
  // Set once the optimizer state was dropped (drop_optimizer_state): the whole state's hash.
  std::optional<std::uint64_t> whole_hash;
};

inline tensor box(torch::Tensor t) { return std::make_shared<tensor_box>(tensor_box{std::move(t)}); }

// A micro-batch's loss, summed over its samples (the step divides by the batch): the loss
// follows the targets. Class ids (int64 [n]): cross-entropy with `label_smoothing`; every
// position's next id (int64 [n, positions], loss next_token): the same, averaged over the
// positions; reals (a
// regression, model::targets of data::dataset::target_values): squared error, every value of
// every sample (MSELoss with reduction sum). The last stage and the one-device reference both
// call this, so they cannot disagree on the loss.
inline torch::Tensor loss_sum(const torch::Tensor& out, const torch::Tensor& y, double label_smoothing) {
  namespace F = torch::nn::functional;
  // A bf16 forward's scores (optimizer_config::bf16) are taken in float32, as autocast does
  // for its losses: the cast is part of the graph, so the gradient flows back through it.
  const torch::Tensor output = out.scalar_type() == torch::kBFloat16 ? out.to(torch::kFloat32) : out;
  if (y.is_floating_point()) {
    if (!output.sizes().equals(y.sizes()))
      throw std::runtime_error("the model's output " + std::to_string(output.numel() / std::max<std::int64_t>(1, output.size(0))) +
                               " values a sample; the regression's targets have " + std::to_string(y.numel() / std::max<std::int64_t>(1, y.size(0))));
    return F::mse_loss(output, y, F::MSELossFuncOptions().reduction(torch::kSum));
  }
  const auto ce = F::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(label_smoothing);
  if (y.dim() == 2) {  // next-token: [n, positions] ids against [n, positions, vocab] scores
    if (output.dim() != 3 || output.size(0) != y.size(0) || output.size(1) != y.size(1))
      throw std::runtime_error("next-token targets of " + std::to_string(y.size(1)) + " positions; the model's output is not [batch, " +
                               std::to_string(y.size(1)) + ", vocab]");
    // The mean over the positions, summed over the samples: the step's division by the batch
    // then gives nanoGPT's loss, the mean over every token of the batch.
    return F::cross_entropy(output.reshape({-1, output.size(2)}), y.reshape({-1}), ce) / static_cast<double>(y.size(1));
  }
  return F::cross_entropy(output, y, ce);
}

// Mixed precision for a scope (optimizer_config::bf16; off: nothing): LibTorch's autocast to
// bfloat16 on this thread, for the device type given, as Python's `with torch.autocast(...)`,
// which also drops autocast's cache of cast weights when the outermost scope ends (the
// optimizer changes the weights in place, so a cached copy would go stale). Autocast is per
// thread: each forward (device thread, reference, profile) opens its own. Backward needs none:
// autograd runs each op in the types its forward recorded.
class autocast_scope {
 public:
  autocast_scope(bool on, c10::DeviceType type) : on_(on), gpu_(type == c10::DeviceType::CUDA) {
    if (!on_) return;
    was_on_ = gpu_ ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
    was_type_ = gpu_ ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
    set(true, torch::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~autocast_scope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(was_on_, was_type_);
  }
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  void set(bool on, at::ScalarType type) const {
    if (gpu_) {
      at::autocast::set_enabled(on);
      at::autocast::set_autocast_gpu_dtype(type);
    } else {
      at::autocast::set_cpu_enabled(on);
      at::autocast::set_autocast_cpu_dtype(type);
    }
  }
  bool on_, gpu_, was_on_ = false;
  at::ScalarType was_type_ = torch::kBFloat16;
};

// LibTorch's CPU generator is process-wide: whatever seeds it and draws (a layer's dropout, a
// built-in layer's initialisation, a clone's reset) does so under this lock, so that threads
// never interleave their draws (scripted.cpp).
std::mutex& draw_mutex();

// LibTorch's clone() runs each module's reset(), which initialises its parameters again from
// the process-wide generator before copying the values over: under draw_mutex, so that a
// copy on one thread never draws between another thread's seeding and its draws (a node
// building a fresh layer while one of its devices copies another got other bits).
inline torch::nn::Sequential deep_copy(const torch::nn::Sequential& s) {
  std::lock_guard<std::mutex> lock(draw_mutex());
  return torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(s->clone()));
}

class model_chain {
 public:
  std::string name;
  std::string source;  // a TorchScript model's file; empty for a built-in one
  std::vector<std::string> names;
  std::vector<torch::nn::Sequential> layers;
  model_io io;
  // An outline (make_model's `outline`) keeps none of a built-in model's layers, only their
  // sizes: `layers` are empty and each is built from `seed` alone when asked (layer_module),
  // as a node builds its own. A process that holds no layer (the controller) needs no more.
  bool outline = false;
  std::uint64_t seed = 0;
  std::vector<std::size_t> outline_bytes, outline_params;  // each layer's parameter bytes and count
};
// Layer `layer`'s module for the caller to keep or change: a deep copy of the model's, or
// for an outline the layer built afresh (the same bits).
torch::nn::Sequential layer_module(const model_chain& m, int layer);

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params, const optimizer_config& opt);
// One optimizer step on summed gradients: gradient = sum / divisor, then the step. Every
// device and the reference step this way, so that the bits agree. The sums are only read
// (a sum may be shared between devices of one process). lr >= 0: the step's learning rate
// (the schedule's), set on every parameter group first; < 0: the optimizer's as it is. `scale`
// (clipping's, model::clip_scale) multiplies each gradient after the division.
void step_on_sums(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& sums,
                  double divisor, double lr = -1, double scale = 1);

// Deep copies of optimizer state (SGD momentum buffers, Adam moments), so that a layer moves
// with its state and training goes on bit for bit.
// Copies onto `to` (a new storage even where the device is the same).
std::unique_ptr<torch::optim::OptimizerParamState> copy_state(const torch::optim::OptimizerParamState& s, const torch::Device& to);

// state_hashes' hash of a module and its parameters' optimizer states (null: none yet), in
// place: what a device hashes without copying the layer.
std::uint64_t state_hash(const torch::nn::Sequential& module, const std::vector<const torch::optim::OptimizerParamState*>& states);

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

// Running statistics (BatchNorm's running mean, variance and count: the buffers a layer
// registers; docs/MODELS.md, "Buffers"). Every micro-batch's forward starts from the step's
// values; what it leaves is its contribution, added in the exact sum's tree beside the
// gradients with a count of 1, and the step ends with buffer = sum / count: the mean over the
// step's micro-batches, the same bits wherever each micro-batch ran.
inline std::vector<torch::Tensor> snapshot(const torch::nn::Sequential& layer) {
  std::vector<torch::Tensor> out;
  for (const auto& b : layer->buffers()) out.push_back(b.detach().clone());
  return out;
}
// After a micro-batch's forward: its contribution (the buffers' values as floats, then the
// count), the buffers back at `start`. Empty for a layer without buffers.
inline std::vector<torch::Tensor> take_running(const torch::nn::Sequential& layer, const std::vector<torch::Tensor>& start) {
  std::vector<torch::Tensor> out;
  if (start.empty()) return out;
  torch::NoGradGuard no_grad;
  auto bufs = layer->buffers();
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    out.push_back(bufs[i].is_floating_point() ? bufs[i].detach().clone() : bufs[i].detach().to(torch::kFloat32));
    // Through .data(): autograd saved the buffer for this micro-batch's backward (BatchNorm
    // does), and a tracked write would bump its version and fail that backward.
    bufs[i].data().copy_(start[i]);
  }
  out.push_back(torch::ones({}, torch::TensorOptions(torch::kFloat32).device(start.front().device())));
  return out;
}
// The step's summed contributions (buffers then count) into the buffers.
inline void set_running(const torch::nn::Sequential& layer, const torch::Tensor* sums, std::size_t n) {
  torch::NoGradGuard no_grad;
  auto bufs = layer->buffers();
  if (bufs.empty() || n != bufs.size() + 1) return;
  const auto count = sums[n - 1];
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    auto mean = sums[i].to(bufs[i].device()) / count.to(bufs[i].device());
    bufs[i].data().copy_(bufs[i].is_floating_point() ? mean : mean.round());
  }
}
// Entries of a layer's summed list: a gradient per parameter, then its running statistics.
inline std::size_t sum_entries(const torch::nn::Sequential& layer) {
  const auto b = layer->buffers().size();
  return layer->parameters().size() + (b ? b + 1 : 0);
}

// A stage boundary hands a tensor on with the strides it has (docs/MODELS.md, "Exact whatever the cut"):
// the next op may round differently on another layout (a transposed view into a matmul, a
// gradient summed over its batch), so a copy to another device or process keeps them.
// The elements a strided layout reaches from its first: one past the farthest, 0 if empty.
inline std::int64_t layout_extent(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  std::int64_t far = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    far += (sizes[i] - 1) * strides[i];
  }
  return far + 1;
}
// Whether `t` is laid out as a new tensor of its sizes would be (the wire's default).
inline bool plain_layout(const torch::Tensor& t) {
  const auto plain = c10::contiguous_strides(t.sizes());
  return t.strides().equals(c10::IntArrayRef(plain.data(), plain.size()));
}
// The storage a strided tensor reads, as a flat contiguous tensor (no copy).
inline torch::Tensor layout_span(const torch::Tensor& t) {
  return t.as_strided({layout_extent(t.sizes(), t.strides())}, {1});
}
// `t` on `d`, with its strides: the span travels and is viewed again on arrival.
inline torch::Tensor to_device_exact(const torch::Tensor& t, const torch::Device& d) {
  if (t.device() == d) return t;
  if (t.is_non_overlapping_and_dense()) return t.to(d);  // keeps its strides (preserve_format)
  return layout_span(t).to(d).as_strided(t.sizes(), t.strides(), 0);
}

// A place ("cpu", "cuda:N") as a torch device; check_place (api.hpp) said it is usable.
torch::Device device_of(const std::string& place);
// Waits for the device's queued work (timing on a GPU); nothing on the CPU.
void synchronize(const torch::Device& d);
// Where a layer's parameters are (the CPU for a layer without any).
torch::Device device_of(const torch::nn::Sequential& layer);

}  // namespace dynapar::model
