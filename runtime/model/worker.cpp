// Where a device computes (the host's CPU or a CUDA device), and one device's layers and the
// work on them. Actor-confined (a device actor's thread).
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <map>
#include <set>
#include <mutex>

#include "common/place.hpp"
#include "model/boxes.hpp"
#include "model/fused_adam.hpp"
#include "model/scripted.hpp"
#include "schedule/reduction_tree.hpp"

namespace dynapar::model {

namespace {

// A run equals one device only if each kernel gives the same bits every time: deterministic
// algorithms (warn-only, so an operation without a deterministic kernel still runs and the
// verify figure shows what it cost), cuBLAS with a fixed workspace, no TF32, no cuDNN
// autotuning. Process-wide in LibTorch, so set once, before the first CUDA work.
void make_cuda_deterministic() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    auto& ctx = at::globalContext();
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
    ctx.setAllowTF32CuBLAS(false);
    ctx.setAllowTF32CuDNN(false);
  });
}

}  // namespace

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

status check_place(const std::string& place) {
  if (!is_place(place)) return make_error("bad_place", "place '" + place + "' is neither 'cpu' nor 'cuda:N'");
  if (place == "cpu") return ok_status();
  const int index = std::stoi(place.substr(5)), count = cuda_device_count();
  if (count == 0)
    return make_error("no_gpu", "place '" + place + "': no CUDA device is visible (this LibTorch is CPU-only or the machine has no GPU; docs/GPU.md)");
  if (index >= count)
    return make_error("no_gpu", "place '" + place + "': only " + std::to_string(count) + " CUDA device(s) are visible");
  make_cuda_deterministic();
  return ok_status();
}

torch::Device device_of(const std::string& place) { return place == "cpu" ? torch::Device(torch::kCPU) : torch::Device(place); }

torch::Device device_of(const torch::nn::Sequential& layer) {
  for (const auto& p : layer->parameters()) return p.device();
  return torch::kCPU;
}

void synchronize(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

namespace {

class torch_worker final : public device_worker {
 public:
  torch_worker(optimizer_config opt, torch::Device device) : opt_(std::move(opt)), device_(device) {}

  void hold(int layer, const layer_copy& replica) override {
    held h;
    h.module = deep_copy(replica->module);
    h.module->to(device_);
    h.optimizer = make_optimizer(h.module->parameters(), opt_);
    h.start = snapshot(h.module);
    // A migrated layer brings its optimizer state: install a copy under the new parameters.
    const auto params = h.module->parameters();
    for (std::size_t i = 0; i < replica->states.size() && i < params.size(); ++i)
      if (replica->states[i]) h.optimizer->state()[state_key(params[i])] = copy_state(*replica->states[i], device_);
    layers_[layer] = std::move(h);
  }
  bool holds(int layer) const override { return layers_.count(layer) > 0; }
  // The micro-batches whose forward ran through the layer go too: a backward of an abandoned
  // attempt arriving after the drop finds no forward, where it would reach for the layer.
  void drop(int layer) override {
    layers_.erase(layer);
    partials_.erase(layer);
    for (auto it = kept_.begin(); it != kept_.end();)
      it = it->second.lo <= layer && layer < it->second.hi ? kept_.erase(it) : std::next(it);
  }

  void begin_step(std::int64_t step, std::int64_t first_micro, bool accumulate) override {
    for (auto& [l, h] : layers_) {
      h.optimizer->zero_grad();
      h.start = snapshot(h.module);
    }
    step_ = step;
    acc_running_.clear();
    kept_.clear();
    partials_.clear();
    first_micro_ = first_micro;
    accumulate_ = accumulate;
    ran_.clear();
    loss_ = torch::zeros({}, torch::TensorOptions(torch::kFloat64).device(device_));
  }

  void continue_step(std::int64_t first_micro) override { first_micro_ = first_micro; }

  result<tensor> forward(int micro, int lo, int hi, const tensor& input) override {
    for (int l = lo; l < hi; ++l)
      if (!holds(l)) return make_error("not_held", "forward of layer " + std::to_string(l) + " on a device that does not hold it");
    if (!input) return make_error("bad_tensor", "forward of micro-batch " + std::to_string(micro) + " without an input");
    return guarded("forward", [&]() -> result<tensor> {
      torch::Tensor x = to_device_exact(input->t, device_);
      // A later stage's input is a leaf of this device's graph: its gradient goes upstream as
      // autograd summed it over the input's uses, layout and all, before the leaf's own
      // accumulation would copy it into the input's layout (docs/MODELS.md, "Exact whatever the cut"): the
      // previous stage's backward then gets what it would have got in one graph.
      auto grad_in = std::make_shared<torch::Tensor>();
      if (lo > 0) {
        x = x.detach().requires_grad_(true);
        x.register_hook([grad_in](const torch::Tensor& g) { *grad_in = g; });
      }
      torch::Tensor y = x;
      set_draws(step_, first_micro_ + micro);
      std::map<int, std::vector<torch::Tensor>> running;
      autocast_scope mixed(opt_.bf16, device_.type());
      for (int l = lo; l < hi; ++l) {
        auto& h = layers_[l];
        y = h.module->forward(y);
        if (!h.start.empty()) running[l] = take_running(h.module, h.start);
      }
      kept_[micro] = {x, y, std::move(grad_in), lo, hi, std::move(running)};
      return box(y.detach());
    }, /*wait=*/false);
  }

  result<tensor> backward(int micro, const tensor& grad_output) override {
    auto it = kept_.find(micro);
    if (it == kept_.end()) return make_error("no_forward", "backward of micro-batch " + std::to_string(micro) + " without its forward");
    if (!grad_output) return make_error("bad_tensor", "backward of micro-batch " + std::to_string(micro) + " without a gradient");
    return guarded("backward", [&]() -> result<tensor> {
      // A first stage of parameterless layers (Flatten, ReLU, pooling) has no graph: its
      // output does not require grad, and there is nothing to differentiate.
      if (it->second.output.requires_grad()) it->second.output.backward(to_device_exact(grad_output->t, device_));
      return finish(micro, it);
    });
  }

  result<tensor> backward_from_loss(int micro, const tensor& targets) override {
    auto it = kept_.find(micro);
    if (it == kept_.end()) return make_error("no_forward", "loss of micro-batch " + std::to_string(micro) + " without its forward");
    if (!targets) return make_error("bad_tensor", "loss of micro-batch " + std::to_string(micro) + " without targets");
    return guarded("loss", [&]() -> result<tensor> {
      auto loss = model::loss_sum(it->second.output, targets->t.to(device_), opt_.label_smoothing);
      // Added up where it is computed: reading it each micro-batch would stall a GPU.
      loss_ += loss.detach().to(torch::kFloat64);
      if (loss.requires_grad()) loss.backward();
      return finish(micro, it);
    });
  }

  double loss_sum() const override { return loss_.defined() ? loss_.item<double>() : 0.0; }

  result<tensor> infer(int lo, int hi, const tensor& input) override {
    for (int l = lo; l < hi; ++l)
      if (!holds(l)) return make_error("not_held", "evaluation of layer " + std::to_string(l) + " on a device that does not hold it");
    if (!input) return make_error("bad_tensor", "evaluation without an input");
    return guarded("evaluation", [&]() -> result<tensor> {
      torch::NoGradGuard no_grad;
      torch::Tensor y = to_device_exact(input->t, device_);
      for (int l = lo; l < hi; ++l) {
        auto& module = layers_[l].module;
        module->eval();
        struct training_again {  // even when forward throws
          torch::nn::Sequential& m;
          ~training_again() { m->train(); }
        } again{module};
        y = module->forward(y);
      }
      return box(y);
    }, /*wait=*/false);
  }

  std::vector<grad_part> partial_gradients(int layer) const override {
    std::vector<grad_part> out;
    if (accumulate_) {
      if (!ran_.count(layer)) return out;
      grad_part p;
      for (const auto& w : layers_.at(layer).module->parameters()) p.grads.push_back(box(w.grad().defined() ? w.grad() : torch::zeros_like(w)));
      if (auto r = acc_running_.find(layer); r != acc_running_.end())
        for (const auto& t : r->second) p.grads.push_back(box(t));
      out.push_back(std::move(p));
      return out;
    }
    auto it = partials_.find(layer);
    if (it == partials_.end()) return out;
    for (const auto& [node, grads] : it->second.nodes()) {
      grad_part p{node.level, node.index, {}};
      for (const auto& g : grads) p.grads.push_back(box(g));
      out.push_back(std::move(p));
    }
    return out;
  }

  status apply(int layer, const std::vector<tensor>& summed, double divisor, std::int64_t step, double scale) override {
    auto it = layers_.find(layer);
    if (it == layers_.end()) return make_error("not_held", "apply to layer " + std::to_string(layer) + " not held here");
    auto params = it->second.module->parameters();
    if (sum_entries(it->second.module) != summed.size())
      return make_error("bad_gradients", "layer " + std::to_string(layer) + ": gradient count differs");
    for (std::size_t i = 0; i < summed.size(); ++i)
      if (!summed[i] || (i < params.size() && !summed[i]->t.sizes().equals(params[i].sizes())))
        return make_error("bad_gradients", "layer " + std::to_string(layer) + ": gradient " + std::to_string(i) + " has the wrong shape");
    auto done = guarded("apply", [&]() -> result<tensor> {
      std::vector<torch::Tensor> sums;
      for (const auto& t : summed) sums.push_back(t->t.to(device_));
      set_running(it->second.module, sums.data() + params.size(), sums.size() - params.size());
      sums.resize(params.size());
      step_on_sums(*it->second.optimizer, params, sums, divisor, lr_at(opt_.schedule, opt_.lr, step), scale);  // as the reference steps
      return tensor{};
    }, /*wait=*/false);
    if (!done) return done.err();
    return ok_status();
  }

  std::uint64_t hash(int layer) const override {
    const auto& h = layers_.at(layer);
    std::vector<const torch::optim::OptimizerParamState*> states;  // as copy() takes them
    for (const auto& p : h.module->parameters()) {
      auto it = h.optimizer->state().find(state_key(p));
      states.push_back(it == h.optimizer->state().end() ? nullptr : it->second.get());
    }
    const auto out = state_hash(h.module, states);
    release(h);
    return out;
  }

  void perturb(int layer) override {
    torch::NoGradGuard no_grad;
    auto params = layers_.at(layer).module->parameters();
    if (!params.empty()) params.front().add_(1e-3);
  }

  layer_copy copy(int layer) const override {
    const auto& h = layers_.at(layer);
    auto box = std::make_shared<layer_box>();
    box->module = deep_copy(h.module);
    for (const auto& p : h.module->parameters()) {
      auto it = h.optimizer->state().find(state_key(p));
      box->states.push_back(it == h.optimizer->state().end() ? nullptr : copy_state(*it->second, device_));
    }
    release(h);
    return box;
  }

 private:
  struct held {
    torch::nn::Sequential module{nullptr};
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    std::vector<torch::Tensor> start;  // running statistics at the step's start (model/boxes.hpp)
  };
  struct kept_activation {
    torch::Tensor input, output;
    std::shared_ptr<torch::Tensor> grad_in;  // the input's gradient as its hook saw it
    int lo, hi;
    std::map<int, std::vector<torch::Tensor>> running;  // by layer: this micro-batch's contribution
  };
  // LibTorch reports bad shapes, types and graphs by throwing: an error value here, so that
  // no c10::Error ever leaves a device as std::terminate. On a GPU, a backward (the end of a
  // micro-batch's work on a device) also waits for the queued kernels, so that the device's
  // measured compute time per step is its GPU time (the controller learns speeds from it)
  // and a GPU's errors surface here. Forwards and updates are not waited for: each wait
  // leaves the GPU idle while the next kernels are launched (on an H100 waiting after every
  // operation cost 0.7 ms a step of the 12 M-parameter vgg, docs/GPU.md); their time lands
  // in the next wait, on the same device.
  template <class F>
  result<tensor> guarded(const char* what, F&& f, bool wait = true) {
    // This device's thread takes the process's intra-op thread count (set_threads) before its
    // first kernel: ATen does so lazily in its own parallel loops only, and a kernel that
    // parallelises by itself (oneDNN's convolution) would otherwise run on OpenMP's default,
    // one thread a core, and sum a weight's gradient in another order than the reference
    // (a stage of one convolution alone: issue 71).
    at::internal::lazy_init_num_threads();
    try {
      auto r = f();
      if (wait) synchronize(device_);
      return r;
    } catch (const c10::Error& e) {
      return make_error("torch", std::string(what) + ": " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return make_error("torch", std::string(what) + ": " + e.what());
    }
  }

  // Moments kept in a file (optimizer_config::offload_dir) that a hash or a copy read: out of
  // the resident set again.
  static void release(const held& h) {
    if (const auto* f = dynamic_cast<const state_in_file*>(h.optimizer.get())) f->release_state();
  }

  result<tensor> finish(int micro, std::map<int, kept_activation>::iterator it) {
    const auto& input = it->second.input;
    // An input the stage's output does not depend on differentiably has a zero gradient.
    const auto& got = *it->second.grad_in;
    torch::Tensor g = it->second.lo == 0 ? torch::Tensor() : got.defined() ? got : torch::zeros_like(input);
    // Take this micro-batch's parameter gradients out (no copy), so the next starts at zero,
    // and merge them into the layer's partial sums (in place: they are this worker's own).
    for (int l = it->second.lo; l < it->second.hi; ++l) {
      auto running = it->second.running.find(l);
      if (accumulate_) {  // left in .grad, where the next micro-batch's backward adds
        ran_.insert(l);
        if (running != it->second.running.end()) {
          auto& acc = acc_running_[l];
          acc = acc.empty() ? std::move(running->second) : add_in_place(std::move(acc), running->second);
        }
        continue;
      }
      std::vector<torch::Tensor> grads;
      for (auto& p : layers_.at(l).module->parameters()) {  // at(): [] would leave an empty layer behind
        grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
        p.mutable_grad() = torch::Tensor();
      }
      if (running != it->second.running.end())
        for (auto& t : running->second) grads.push_back(std::move(t));
      partials_[l].add_leaf(first_micro_ + micro, std::move(grads), add_in_place);
    }
    kept_.erase(it);
    return g.defined() ? box(g) : tensor{};
  }
  optimizer_config opt_;
  torch::Device device_;
  std::map<int, held> layers_;
  std::map<int, kept_activation> kept_;
  std::map<int, schedule::partial_sums<std::vector<torch::Tensor>>> partials_;  // by layer: per parameter
  std::int64_t step_ = 0;  // seeds a layer's draws (dropout) with the micro-batch
  std::int64_t first_micro_ = 0;
  bool accumulate_ = false;
  std::map<int, std::vector<torch::Tensor>> acc_running_;  // accumulate: running statistics summed by layer
  std::set<int> ran_;  // accumulate: layers that ran this step
  torch::Tensor loss_;  // float64 on the device: this step's summed loss
};

}  // namespace

std::unique_ptr<device_worker> make_worker(const optimizer_config& opt, const std::string& place) {
  return std::make_unique<torch_worker>(opt, device_of(place));
}

}  // namespace dynapar::model
