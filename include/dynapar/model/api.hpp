// What the rest of dynapar sees of LibTorch: opaque tensors and layers, one device's worker,
// and host-side helpers. No torch header here (CAF and torch stay in separate translation
// units: one TU with both costs ~48 s and 2.3 GB to compile).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/lr_schedule.hpp"
#include "common/result.hpp"
#include "data/dataset.hpp"
#include "data/source.hpp"
#include "planner/profile.hpp"

namespace dynapar::model {

struct tensor_box;                         // a torch::Tensor (shares storage: in-process moves copy nothing)
using tensor = std::shared_ptr<tensor_box>;
struct layer_box;                          // a deep copy of one layer: module, parameters, optimizer state
using layer_copy = std::shared_ptr<layer_box>;
class model_chain;                         // the initial model, built once from a seed
struct layer_wire;                         // a layer as tensors for another process (below)

// Parameter gradients summed over the micro-batches of one node of the exact sum's tree
// (level, index: micro-batches [index 2^level, (index+1) 2^level) of the step).
struct grad_part {
  int level = 0;
  std::int64_t index = 0;
  std::vector<tensor> grads;  // one per parameter
};

struct optimizer_config {
  // "adam" (L2 weight decay, as torch.optim.Adam), "adamw" (decoupled weight decay, as
  // torch.optim.AdamW) or "sgd" (momentum, as torch.optim.SGD without dampening).
  std::string kind = "adam";
  double lr = 1e-3;
  double momentum = 0.9;
  double weight_decay = 0;
  bool nesterov = false;                   // sgd only, with momentum > 0
  lr_schedule schedule{};                  // the step's rate: lr_at(schedule, lr, step)
  // The loss the last stage differentiates: cross-entropy summed over the micro-batch, with
  // this label smoothing in [0, 1) (torch.nn.CrossEntropyLoss's). With the optimizer here, as
  // it is the rest of what a device needs to train exactly as the reference does.
  double label_smoothing = 0;
  // > 0: the step's gradients clipped by their global 2-norm to this, as
  // torch.nn.utils.clip_grad_norm_ (every parameter of the model, in layer order; 0: off).
  double clip_grad_norm = 0;
  // Mixed precision: each forward under LibTorch's autocast to bfloat16, as
  // `torch.autocast(device, torch.bfloat16)` (model/boxes.hpp: autocast_scope). Parameters,
  // their gradients, the sums and the optimizer stay float32; the loss is taken in float32.
  bool bf16 = false;
  // Not the job's but this process's (`--offload-optimizer`; never sent, not in a job's
  // fingerprint): Adam's moments kept between steps in a file in this directory
  // (fused_adam::offload_to); empty: in memory. The same bits either way.
  std::string offload_dir{};
};
// Whether `o` names an optimizer make_optimizer builds; the error names the field.
status check_optimizer(const optimizer_config& o);

// What a model takes and gives (a TorchScript file: as its exporter wrote, else 1x28x28, the
// classes from its output): checked against the data before a run, and what profiles feed it.
struct model_io {
  int channels = 1, rows = 28, cols = 28;  // one sample: [channels, rows, cols]
  int vocab = 0;             // > 0: the sample is token ids below it (text), not pixels
  int classes = 10;          // 0: unknown
  int positions = 0;         // > 0: scores for each of so many positions, [n, positions, classes] (next-token)
};
// Whether `m` can train on `d`: its sample shape, pixels or tokens, and classes; the error
// names both.
status check_data(const model_chain& m, const data::dataset& d);

const std::vector<std::string>& builtin_model_names();   // mlp, linear, wide, cnn, resnet, transformer, vgg, resnet18, gpt, gpt_text, gpt_lm
// A built-in name or a TorchScript file (each top-level child one layer, checked against the
// file's own forward: model/scripted.hpp). Built-in parameters are drawn from `seed`, a file's
// come from the file, so every replica and the reference start from the same bits.
// `outline`: a built-in model's layers are built one at a time, measured and dropped; the
// chain keeps their names and sizes, and builds a layer again whenever one is asked for
// (copy_layer, from_wire, a profile, a reference), so no whole model is ever held. A
// TorchScript file is loaded whole either way (its file defines the layers).
result<std::shared_ptr<const model_chain>> make_model(const std::string& name_or_path, std::uint64_t seed, bool outline = false);
// Layer `index` of make_model(name_or_path, seed) by itself, the same bits: a built-in model's
// layer is drawn from the seed and its index alone, without building the others; a TorchScript
// file's comes from the file. The error names the model's layer count.
result<layer_copy> make_layer(const std::string& name_or_path, std::uint64_t seed, int index);
// The layers of a model as a process that holds only some of them gets them (issue 50): a
// built-in model's layer is built alone from the seed when asked (make_layer), and nothing of
// the others is kept; a TorchScript model is kept whole, as its file defines its layers.
class layer_source {
 public:
  static result<layer_source> open(const std::string& name_or_path, std::uint64_t seed);
  static layer_source of(std::shared_ptr<const model_chain> whole);  // a process with the whole model
  int num_layers() const { return layers_; }
  result<layer_copy> fresh(int layer) const;  // the layer before any step
  result<layer_copy> from_wire(int layer, const layer_wire& w) const;  // model::from_wire on it

 private:
  std::string name_;
  std::uint64_t seed_ = 0;
  int layers_ = 0;
  std::shared_ptr<const model_chain> whole_;  // TorchScript, or of(): every layer
  // The chain holding `layer`: the whole model, or one built with that layer alone.
  result<std::shared_ptr<const model_chain>> chain_for(int layer) const;
};
// A TorchScript file's name (ends in .pt), as opposed to a built-in model's.
inline bool is_torchscript(const std::string& name) { return name.size() > 3 && name.compare(name.size() - 3, 3, ".pt") == 0; }
int num_layers(const model_chain& m);
// A TorchScript model's file again, with `layers`' (trained) parameters and buffers.
status save_model(const model_chain& m, const std::vector<layer_copy>& layers, const std::string& path);
std::size_t param_bytes(const model_chain& m, int layer);  // its parameters' bytes
std::size_t param_count(const model_chain& m, int layer);  // its parameters (the first of its gradients)
std::string layer_name(const model_chain& m, int layer);
layer_copy copy_layer(const model_chain& m, int layer);

// Where a device computes (docs/GPU.md): "cpu" or "cuda:N". check_place says whether this
// process can use it (a CPU-only LibTorch, a GPU index beyond those visible: an error naming
// the place); on a GPU it also makes LibTorch's kernels deterministic, process-wide.
status check_place(const std::string& place);
int cuda_device_count();  // 0 with a CPU-only LibTorch

// One device's layers, keyed by layer index so layers can move between devices.
// Actor-confined: one thread at a time.
class device_worker {
 public:
  virtual ~device_worker() = default;
  virtual void hold(int layer, const layer_copy& replica) = 0;
  virtual bool holds(int layer) const = 0;
  virtual void drop(int layer) = 0;  // a layer that moved away (no-op if not held)
  // Zero gradients, drop kept activations, loss = 0. This device's micro-batch m is the step's
  // micro-batch first_micro + m (its place in the exact sum's tree). `accumulate` (exact:
  // false): autograd adds the micro-batches in place, and each layer has one partial sum.
  // `step` seeds the draws of a layer that draws (dropout) with the micro-batch.
  virtual void begin_step(std::int64_t step, std::int64_t first_micro = 0, bool accumulate = false) = 0;
  // The same step goes on (within-step dispatch: a probe's rest): gradients and loss stay, and
  // micro-batch m is from now on the step's micro-batch first_micro + m.
  virtual void continue_step(std::int64_t first_micro) = 0;
  // Runs layers [lo, hi) on micro-batch `micro`; keeps what backward needs.
  virtual result<tensor> forward(int micro, int lo, int hi, const tensor& input) = 0;
  // Backward from the gradient of the stage output; returns the gradient of its input
  // (null on the first stage).
  virtual result<tensor> backward(int micro, const tensor& grad_output) = 0;
  // The last stage: cross-entropy summed over the micro-batch, then backward.
  virtual result<tensor> backward_from_loss(int micro, const tensor& targets) = 0;
  virtual double loss_sum() const = 0;
  // Forward only, in evaluation mode (BatchNorm's running statistics, no dropout), keeping
  // nothing and changing nothing: the devices' evaluation of the validation set.
  virtual result<tensor> infer(int lo, int hi, const tensor& input) = 0;
  // This step's gradients of the layer (then its running statistics: model/boxes.hpp) as partial sums of the exact sum's fixed tree
  // (schedule/reduction_tree.hpp): a micro-batch's gradients are merged with its sibling's as
  // soon as both are here, so a device keeps and sends O(log n) lists, not one per micro-batch.
  virtual std::vector<grad_part> partial_gradients(int layer) const = 0;
  // gradient = summed / divisor (times `scale`, clipping's factor, where it is not 1), then one
  // optimizer step on the layer at training step `step`'s learning rate (the schedule's).
  virtual status apply(int layer, const std::vector<tensor>& summed, double divisor, std::int64_t step, double scale) = 0;
  // The layer's whole state (parameters, buffers, optimizer state) hashed, as state_hashes
  // hashes its copy: what the replica checks compare, and what the end asks for when no
  // layer has to come back (train_settings::final_layers).
  virtual std::uint64_t hash(int layer) const = 0;
  virtual layer_copy copy(int layer) const = 0;
  // Fault injection: nudges the layer's first parameter, so its replicas no longer agree.
  virtual void perturb(int layer) = 0;
};
// On `place` (checked by check_place): layers, optimizer state, activations and gradients
// live there; inputs from elsewhere are copied in, outputs stay (the receiver copies them).
std::unique_ptr<device_worker> make_worker(const optimizer_config& opt, const std::string& place = "cpu");

// A job's data set (training or validation split): kind torch, tensors a user saved with
// torch.save (DIR/train.pt, optionally DIR/val.pt, each (inputs, labels)), read here with
// LibTorch's loader, whole in memory; every other kind by data::load.
result<data::dataset> load_data(const data::source& s, bool train);

// Host side (the training driver).
// [n, channels, rows, cols], normalised; `step` seeds augmentation (< 0: evaluation, none).
tensor inputs(const data::dataset& d, const std::vector<int>& samples, int lo, int hi, std::int64_t step = -1);
// [n] int64 class ids; a regression's (d.target_values > 0): [n, target_values] float32.
tensor targets(const data::dataset& d, const std::vector<int>& samples, int lo, int hi);
// The step's gradient sum over its `micro_batches` from every holder's partial sums, in the
// fixed tree's order (the same bits whatever the plan); an error if a micro-batch is missing
// or counted twice. Parts on different places are added where the left one is (IEEE addition
// gives the same bits on a CPU and a GPU).
result<std::vector<tensor>> tree_sum(std::vector<grad_part> parts, std::int64_t micro_batches);
// exact: false: each part one holder's whole sum (autograd's accumulation), in group order;
// added as the leaves of the same tree (their places in it are ignored).
result<std::vector<tensor>> holders_sum(std::vector<grad_part> parts);
// A bucket: several layers with the same holders summed as one, so that they cost one
// exchange instead of one each. Part by part (every layer a device holds has the same tree
// nodes; an error says which does not), each layer's parameters one after another. Addition
// is element-wise, so the bucket's sum has every layer's bits.
result<std::vector<grad_part>> join_layers(std::vector<std::vector<grad_part>> per_layer);
// The bucket's sum cut back into its layers' gradients, `counts[i]` parameters for the i-th.
result<std::vector<std::vector<tensor>>> split_layers(std::vector<tensor> sum, const std::vector<std::size_t>& counts);
// Clipping by global norm (optimizer_config::clip_grad_norm), as torch.nn.utils.clip_grad_norm_:
// each gradient's 2-norm once its sum is divided by `divisor` (float32, as the gradient is),
// and the factor every gradient is then multiplied by, max_norm / (total + 1e-6) at most 1,
// `total` being the 2-norm of all the norms in order. The holders, the driver and the
// reference compute both alike, so a clipped run is as exact as any.
std::vector<float> grad_norms(const std::vector<tensor>& summed, double divisor);
double clip_scale(const std::vector<float>& norms, double max_norm);
// Bytes on the wire: a tensor's data; a layer's parameters plus its optimizer state (what a
// migration moves); a gradient list.
std::size_t bytes(const tensor& t);
std::int64_t samples(const tensor& t);  // its first dimension (0: null or a scalar)
std::size_t bytes(const layer_copy& l);
std::size_t bytes(const std::vector<tensor>& ts);
// Memory a held layer takes once trained with `opt`: its parameters plus the optimizer state
// they will have (Adam: two moments; SGD with momentum: one buffer), even before the first
// step creates it.
std::size_t resident_bytes(const layer_copy& l, const optimizer_config& opt);
// Test accuracy of the model made of one copy per layer; for a regression (d.target_values >
// 0), its mean squared error per value instead (metric_name says which).
double accuracy(const std::vector<layer_copy>& layers, const data::dataset& d);
// The samples per evaluation chunk, in accuracy() and on the devices alike: the same chunks
// give the same outputs, bit for bit. Small, as a device evaluates beside what it trains: at
// 128 the flagship's nodes peaked 25-75 MB higher than without evaluating (the CNN's first
// layers' activations; a training micro-batch there is 8 samples).
inline constexpr int evaluation_chunk = 32;
// A chunk's part of the metric: its correct predictions (every position of a next-token
// model), or a regression's squared errors. metric_of: the whole set's sum as accuracy or MSE.
result<double> score(const tensor& outputs, const tensor& targets);  // an error: they do not match
double metric_of(double score_sum, const data::dataset& d);
inline const char* metric_name(const data::dataset& d) { return d.target_values > 0 ? "mse" : "accuracy"; }
// Largest difference between two models, per tensor max|a - b| / max|b|, over parameters,
// running statistics (buffers) and optimizer state; infinite where they do not line up or a
// NaN appears.
double max_rel_diff(const std::vector<layer_copy>& a, const std::vector<layer_copy>& b);
// Each layer's whole state hashed (data::hasher over each tensor's type, shape and bytes, in
// max_rel_diff's order: parameters, buffers, optimizer state with its step count): equal
// exactly when the layers are bit for bit the same, but for a hash collision.
std::vector<std::uint64_t> state_hashes(const std::vector<layer_copy>& layers);
// Frees a copy's optimizer state: it keeps its parameters and buffers (what evaluation reads),
// and its whole state's hash, which state_hashes gives from then on. `whole_hash`: that hash
// as taken where the state was (a copy that came over the wire without it).
void drop_optimizer_state(const layer_copy& layer, std::optional<std::uint64_t> whole_hash = std::nullopt);
void set_threads(int intra_op);
// A float32 tensor of n elements, all `value` (benchmarks).
tensor filled_tensor(std::int64_t n, float value);
// A fixed piece of LibTorch work (small matrix products, ~ a millisecond here); returns its
// seconds. A joining device runs it at its speed so the controller starts from a measured
// speed (this machine's time over the device's), not from a configured one.
double benchmark_work(const std::string& place = "cpu");

// The same job on one plain device: the reference --verify compares against, and the
// plain-LibTorch peer of the benchmarks.
class reference {
 public:
  reference(const model_chain& m, const optimizer_config& opt, const std::string& place = "cpu");
  ~reference();
  // One optimizer step on the samples: the summed cross-entropy's gradient accumulated over
  // micro-batches of `micro_batch` samples (0: one), divided by the batch; running statistics
  // as devices keep them; `step` seeds dropout as on devices. Returns the mean loss.
  double step(const data::dataset& d, const std::vector<int>& samples, int micro_batch = 0, std::int64_t step = 0);
  std::vector<layer_copy> layers() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Tensors between processes: a description (element type, shape) and the raw bytes as a
// blob, both ways without a copy (the blob keeps the tensor alive; the received tensor keeps
// the frame alive). Types: 0 float32, 1 float64, 2 int64, 3 int32, 4 uint8, 5 bfloat16.
// `strides` empty: the bytes are the tensor in row-major order; else a view with these
// strides over the bytes (its span of storage: a transposed view stays transposed).
struct tensor_meta {
  std::uint8_t dtype = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides{};
};
blob to_blob(const tensor& t, tensor_meta& meta);
// Checks the type and that the bytes match the shape exactly.
result<tensor> from_blob(const tensor_meta& meta, const blob& data);

// A layer between processes: its tensors (parameters, then each parameter's optimizer state)
// and a layout of integers saying which state each parameter has (docs/DISTRIBUTED.md).
struct layer_wire {
  std::vector<std::int64_t> layout;
  std::vector<tensor> tensors;
};
layer_wire to_wire(const layer_copy& l);
// Rebuilt on layer `layer` of the receiver's own copy of the model; the tensors must match
// its parameters' shapes and the layout its optimizer's state.
result<layer_copy> from_wire(const model_chain& m, int layer, const layer_wire& w);

// Checkpoint files: every layer with its optimizer state (docs/RELIABILITY.md). The caller
// makes the replacement atomic (write to a temporary name, then rename).
status save_layers(const std::string& path, const std::vector<layer_copy>& layers);
result<std::vector<layer_copy>> load_layers(const std::string& path, const model_chain& m);
// A checkpoint's shard: layer `layer` with its optimizer state, written durably by a device
// that holds it; read back as its wire form (checked to be that layer's), which the reader
// rebuilds on its own copy of the layer (from_wire, layer_source::from_wire).
status save_shard(const std::string& path, int layer, const layer_copy& l);
result<layer_wire> read_shard(const std::string& path, int layer);

// Measures per-layer forward and backward times and sizes on this machine, as a planner
// profile: timed at `batch` and 2 x `batch` (`repeat` runs each after a warm-up), per-sample
// times from the difference and the per-micro-batch fixed time from the rest. Exact at those
// two sizes: pass the micro-batch the job will use.
result<planner::model_profile> measure_profile(const model_chain& m, int batch, int repeat, const optimizer_config& opt,
                                               const std::string& place = "cpu");

// `dynapar bench optimizer`: one Adam step on summed gradients over all of a model's
// parameters, as devices step (step_on_sums: Adam in one pass) against LibTorch's Adam on
// the same gradients (gradient = sum / samples, then its step, as dynapar did before).
// Medians of `repeat` steps after a warm-up, on `place`.
struct optimizer_timing {
  std::int64_t parameters = 0;
  double dynapar_s = 0, libtorch_s = 0;
};
result<optimizer_timing> time_adam(const model_chain& m, int repeat, const std::string& place = "cpu");

}  // namespace dynapar::model
