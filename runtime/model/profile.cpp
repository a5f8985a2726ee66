// `dynapar profile`: per-layer forward and backward times and sizes, measured here.
#include <algorithm>
#include <chrono>
#include <tuple>
#include <vector>

#include "model/boxes.hpp"

namespace dynapar::model {

namespace {
double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Seconds of forward and backward of a layer on input `x` (median of `repeat` runs after a
// warm-up: on a shared machine single runs are sometimes much slower).
std::pair<double, double> time_layer(const torch::nn::Sequential& proto, const torch::Tensor& x, bool needs_grad, int repeat,
                                     bool bf16, torch::Tensor* out) {
  using clock = std::chrono::steady_clock;
  const auto device = x.device();
  auto layer = deep_copy(proto);
  layer->to(device);
  torch::Tensor in = x.detach().requires_grad_(needs_grad);
  std::vector<double> fwd, bwd;
  torch::Tensor y;
  for (int r = 0; r <= repeat; ++r) {  // run 0 warms up
    synchronize(device);  // a GPU runs queued work later: time it to the end
    const auto t0 = clock::now();
    {
      autocast_scope mixed(bf16, device.type());  // as a device runs it (a bf16 job's activations are half the bytes)
      y = layer->forward(in);
    }
    synchronize(device);
    const auto t1 = clock::now();
    if (y.requires_grad()) y.backward(torch::ones_like(y));  // a parameterless first layer has no graph
    synchronize(device);
    const auto t2 = clock::now();
    if (r > 0) {
      fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
      bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
  }
  if (out) *out = y.detach();
  return {median(fwd), median(bwd)};
}

// A layer that autocast cannot run: LibTorch 1.13's CPU autocast leaves some ops to their
// inputs' types (LayerNorm fed a bf16 activation with float32 weights fails). The job's
// setting is what is wrong; the message's last line says why (a TorchScript traceback
// comes before it).
error bf16_refused(std::size_t layer, const std::string& name, std::string what) {
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  const auto cut = what.rfind('\n');
  return make_error("bad_precision", "layer " + std::to_string(layer) + " (" + name + ") cannot run under precision: bf16 (" +
                                    (cut == std::string::npos ? what : what.substr(cut + 1)) +
                                    "): LibTorch 1.13's autocast on the CPU casts only some ops to bfloat16 and leaves "
                                    "others, such as LayerNorm, to their inputs' types; train this model with precision: fp32");
}

// Seconds of `step` given gradient sums shaped like `params` (median of `repeat` after a
// warm-up).
template <class Step>
double time_steps(const std::vector<torch::Tensor>& params, int repeat, const torch::Device& device, Step&& step) {
  using clock = std::chrono::steady_clock;
  std::vector<torch::Tensor> summed;
  for (const auto& p : params) summed.push_back(torch::randn_like(p));
  std::vector<double> runs;
  for (int r = 0; r <= repeat; ++r) {
    synchronize(device);
    const auto t0 = clock::now();
    step(summed);
    synchronize(device);
    if (r > 0) runs.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  return median(runs);
}

// Seconds of one optimizer step on a layer's parameters, done as a device applies a summed
// gradient (step_on_sums).
double time_update(const torch::nn::Sequential& proto, const optimizer_config& opt, int repeat, const torch::Device& device) {
  auto layer = deep_copy(proto);
  layer->to(device);
  auto params = layer->parameters();
  if (params.empty()) return 0;
  auto optimizer = make_optimizer(params, opt);
  return time_steps(params, repeat, device, [&](const std::vector<torch::Tensor>& summed) { step_on_sums(*optimizer, params, summed, 128.0); });
}
}  // namespace

result<planner::model_profile> measure_profile(const model_chain& m, int batch, int repeat, const optimizer_config& opt,
                                               const std::string& place) {
  if (batch < 1 || repeat < 1) return make_error("bad_usage", "batch and repeat must be >= 1");
  if (auto st = check_place(place); !st) return st.err();
  const auto device = device_of(place);
  planner::model_profile out;
  out.name = m.name;
  out.optimizer_state_factor = opt.kind == "sgd" ? 1 : 2;
  // Timed at `batch` and twice that: time(b) = b * per-sample + fixed, fitted through both
  // points. Small batches pay a per-call cost (kernel set-up, allocation) that a per-sample
  // time taken at one batch would spread wrongly over other sizes.
  // Samples of the model's own kind: pixels, or token ids (a text model's first layer looks
  // its ids up, so random ones cost what real ones do).
  auto samples = [&](std::int64_t n) {
    const auto& io = m.io;
    return (io.vocab > 0 ? torch::randint(0, io.vocab, {n, 1, io.rows, io.cols}).to(torch::kFloat32)
                         : torch::randn({n, io.channels, io.rows, io.cols}))
        .to(device);
  };
  torch::Tensor x1 = samples(batch), x2 = samples(2 * batch);
  for (int l = 0; l < num_layers(m); ++l) {
    const auto layer = m.outline ? layer_module(m, l) : m.layers[l];  // an outline's: built for this alone
    torch::Tensor y1, y2;
    double f1 = 0, b1 = 0, f2 = 0, b2 = 0;
    try {  // LibTorch reports a layer that cannot run by throwing: an error naming the layer
      std::tie(f1, b1) = time_layer(layer, x1, l > 0, repeat, opt.bf16, &y1);
      std::tie(f2, b2) = time_layer(layer, x2, l > 0, repeat, opt.bf16, &y2);
    } catch (const std::exception& e) {
      // An eager op's c10::Error without LibTorch's backtrace; the TorchScript interpreter's
      // error is its traceback, then the message.
      const auto* op = dynamic_cast<const c10::Error*>(&e);
      if (opt.bf16) return bf16_refused(l, m.names[l], op ? op->what_without_backtrace() : e.what());
      return make_error("torch", "profile of layer " + std::to_string(l) + " (" + m.names[l] + "): " + e.what());
    }
    planner::layer_profile lp;
    lp.name = m.names[l];
    // Noise can make the larger batch look no slower: then no fixed part, per-sample from it.
    lp.fwd_s = f2 > f1 ? (f2 - f1) / batch : f2 / (2 * batch);
    lp.bwd_s = b2 > b1 ? (b2 - b1) / batch : b2 / (2 * batch);
    lp.fixed_s = std::max(0.0, f1 + b1 - batch * (lp.fwd_s + lp.bwd_s));
    lp.act_bytes = static_cast<double>(y1[0].numel() * y1.element_size());
    for (const auto& p : layer->parameters()) lp.param_bytes += static_cast<double>(p.numel() * p.element_size());
    lp.update_s = time_update(layer, opt, repeat, device);
    lp.act_mem_bytes = 2 * lp.act_bytes + static_cast<double>(x1[0].numel() * x1.element_size());
    out.layers.push_back(lp);
    x1 = y1;
    x2 = y2;
  }
  return out;
}

result<optimizer_timing> time_adam(const model_chain& m, int repeat, const std::string& place) {
  if (auto st = check_place(place); !st) return st.err();
  if (repeat < 1) return make_error("bad_args", "repeat must be at least 1");
  try {
    const auto device = device_of(place);
    std::vector<torch::Tensor> params;  // the tensors keep their storage without the modules
    for (int l = 0; l < num_layers(m); ++l) {
      auto layer = layer_module(m, l);
      layer->to(device);
      for (const auto& p : layer->parameters()) params.push_back(p);
    }
    optimizer_timing t;
    for (const auto& p : params) t.parameters += p.numel();
    const optimizer_config adam{"adam", 1e-3, 0, 0};
    const double samples = 128;  // what the sums are divided by
    auto ours = make_optimizer(params, adam);
    t.dynapar_s = time_steps(params, repeat, device, [&](const std::vector<torch::Tensor>& summed) { step_on_sums(*ours, params, summed, samples); });
    torch::optim::Adam theirs(params, torch::optim::AdamOptions(adam.lr));
    torch::NoGradGuard no_grad;
    t.libtorch_s = time_steps(params, repeat, device, [&](const std::vector<torch::Tensor>& summed) {
      for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = summed[i] / samples;
      theirs.step();
    });
    return t;
  } catch (const c10::Error& e) {
    return make_error("torch", std::string("optimizer timing: ") + e.what_without_backtrace());
  }
}

}  // namespace dynapar::model
