// Host-side helpers of the training driver: batches, gradient sums, accuracy, comparison.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <system_error>
#include <iterator>
#include <limits>

#include "data/hash.hpp"
#include "model/boxes.hpp"
#include "schedule/reduction_tree.hpp"

namespace dynapar::model {

tensor inputs(const data::dataset& d, const std::vector<int>& samples, int lo, int hi, std::int64_t step) {
  const int n = hi - lo, px = d.rows * d.cols;
  if (d.store) {
    auto t = torch::empty({n, d.channels, d.rows, d.cols}, torch::kFloat32);
    auto* out = t.data_ptr<float>();
    const std::size_t each = static_cast<std::size_t>(d.channels) * px;
    auto read = [&](int a, int b) {
      for (int i = a; i < b; ++i) d.store->values(samples[lo + i], step, out + i * each);
    };
    // Samples that must be decoded (images) are read on up to data::sample_store::decoders
    // threads, each filling its own rows; the first thread's error is rethrown here, and the
    // others' wait for it (a future's end). Without a thread to be had, this one reads all.
    const int threads = std::min(n, d.store->decodes() ? data::sample_store::decoders : 1);
    std::vector<std::future<void>> others;
    try {
      for (int k = 1; k < threads; ++k) others.push_back(std::async(std::launch::async, read, n * k / threads, n * (k + 1) / threads));
    } catch (const std::system_error&) {
      read(n * static_cast<int>(others.size() + 1) / threads, n);
    }
    read(0, n / threads);
    for (auto& f : others) f.get();
    return box(t);
  }
  auto t = torch::empty({n, 1, d.rows, d.cols}, torch::kUInt8);
  auto* out = t.data_ptr<std::uint8_t>();
  for (int i = 0; i < n; ++i)
    std::memcpy(out + static_cast<std::size_t>(i) * px, d.images.data() + static_cast<std::size_t>(samples[lo + i]) * px, px);
  if (d.tokens) return box(t.to(torch::kFloat32));  // token ids, as they are
  // Fashion-MNIST's pixel mean and standard deviation.
  return box((t.to(torch::kFloat32) / 255.0 - 0.2860) / 0.3530);
}

tensor targets(const data::dataset& d, const std::vector<int>& samples, int lo, int hi) {
  if (d.target_values > 0 && d.store) {  // a regression: each sample's reals
    auto t = torch::empty({hi - lo, d.target_values}, torch::kFloat32);
    auto* out = t.data_ptr<float>();
    for (int i = lo; i < hi; ++i) d.store->target_values(samples[i], out + static_cast<std::size_t>(i - lo) * d.target_values);
    return box(t);
  }
  if (d.target_ids > 0 && d.store) {  // next-token: each position's next id
    auto t = torch::empty({hi - lo, d.target_ids}, torch::kInt64);
    auto* out = t.data_ptr<std::int64_t>();
    for (int i = lo; i < hi; ++i) d.store->target_ids(samples[i], out + static_cast<std::size_t>(i - lo) * d.target_ids);
    return box(t);
  }
  auto t = torch::empty({hi - lo}, torch::kInt64);
  auto* out = t.data_ptr<std::int64_t>();
  for (int i = lo; i < hi; ++i) out[i - lo] = d.store ? d.store->label(samples[i]) : d.labels[samples[i]];
  return box(t);
}

result<std::vector<tensor>> tree_sum(std::vector<grad_part> parts, std::int64_t micro_batches) {
  using nodes = std::vector<std::pair<schedule::tree_node, std::vector<tensor>>>;
  nodes in;
  std::size_t width = parts.empty() ? 0 : parts.front().grads.size();
  for (auto& p : parts) {
    if (p.grads.size() != width) return make_error("bad_sum", "partial sums with different numbers of parameters");
    for (const auto& g : p.grads)
      if (!g) return make_error("bad_sum", "a partial sum without its tensor");
    in.emplace_back(schedule::tree_node{p.level, p.index}, std::move(p.grads));
  }
  std::string mismatch;
  // Out of place: the parts may be a device's own buffers (in one process nothing is copied).
  auto add = [&](std::vector<tensor> a, std::vector<tensor> b) {
    std::vector<tensor> out;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!a[i]->t.sizes().equals(b[i]->t.sizes())) {
        mismatch = "partial sums of different shapes";
        return a;
      }
      out.push_back(box(a[i]->t + b[i]->t.to(a[i]->t.device())));
    }
    return out;
  };
  auto total = schedule::evaluate_tree(std::move(in), micro_batches, add);
  if (!total) return total.err();
  if (!mismatch.empty()) return make_error("bad_sum", mismatch);
  return total;
}

result<std::vector<tensor>> holders_sum(std::vector<grad_part> parts) {
  for (std::size_t k = 0; k < parts.size(); ++k) parts[k].level = 0, parts[k].index = static_cast<std::int64_t>(k);
  const auto n = static_cast<std::int64_t>(parts.size());
  return tree_sum(std::move(parts), n);
}

result<std::vector<grad_part>> join_layers(std::vector<std::vector<grad_part>> per_layer) {
  if (per_layer.empty()) return make_error("bad_sum", "a bucket without layers");
  auto out = std::move(per_layer.front());
  for (std::size_t l = 1; l < per_layer.size(); ++l) {
    auto& parts = per_layer[l];
    if (parts.size() != out.size()) return make_error("bad_sum", "the bucket's layer " + std::to_string(l) + " has other partial sums than its first");
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].level != out[i].level || parts[i].index != out[i].index)
        return make_error("bad_sum", "the bucket's layer " + std::to_string(l) + " has other partial sums than its first");
      for (auto& g : parts[i].grads) out[i].grads.push_back(std::move(g));
    }
  }
  return out;
}

result<std::vector<std::vector<tensor>>> split_layers(std::vector<tensor> sum, const std::vector<std::size_t>& counts) {
  std::size_t total = 0;
  for (auto c : counts) total += c;
  if (total != sum.size())
    return make_error("bad_sum", "a bucket's sum of " + std::to_string(sum.size()) + " tensors for layers of " + std::to_string(total));
  std::vector<std::vector<tensor>> out;
  auto it = sum.begin();
  for (auto c : counts) {
    out.emplace_back(std::make_move_iterator(it), std::make_move_iterator(it + static_cast<std::ptrdiff_t>(c)));
    it += static_cast<std::ptrdiff_t>(c);
  }
  return out;
}

std::size_t bytes(const tensor& t) { return t ? static_cast<std::size_t>(t->t.nbytes()) : 0; }
std::int64_t samples(const tensor& t) { return t && t->t.dim() > 0 ? t->t.size(0) : 0; }

std::size_t bytes(const std::vector<tensor>& ts) {
  std::size_t n = 0;
  for (const auto& t : ts) n += bytes(t);
  return n;
}

std::size_t bytes(const layer_copy& l) {
  std::size_t n = 0;
  for (const auto& p : l->module->parameters()) n += static_cast<std::size_t>(p.nbytes());
  for (const auto& st : l->states) {
    if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(st.get()))
      n += static_cast<std::size_t>(a->exp_avg().nbytes() + a->exp_avg_sq().nbytes()) + sizeof(std::int64_t);
    else if (const auto* w = dynamic_cast<const torch::optim::AdamWParamState*>(st.get()))
      n += static_cast<std::size_t>(w->exp_avg().nbytes() + w->exp_avg_sq().nbytes()) + sizeof(std::int64_t);
    else if (const auto* m = dynamic_cast<const torch::optim::SGDParamState*>(st.get()))
      n += static_cast<std::size_t>(m->momentum_buffer().defined() ? m->momentum_buffer().nbytes() : 0);
  }
  return n;
}

std::size_t resident_bytes(const layer_copy& l, const optimizer_config& opt) {
  std::size_t params = 0;
  for (const auto& p : l->module->parameters()) params += static_cast<std::size_t>(p.nbytes());
  const std::size_t k = opt.kind == "sgd" ? (opt.momentum > 0 ? 1 : 0) : 2;
  return std::max(bytes(l), params * (1 + k));
}

result<double> score(const tensor& outputs, const tensor& targets) {
  if (!outputs || !targets) return make_error("bad_tensor", "scoring a chunk without its outputs or targets");
  torch::NoGradGuard no_grad;
  const auto& x = outputs->t;
  const auto& y = targets->t;
  try {
    if (y.is_floating_point())  // a regression
      return (x.to(torch::kCPU).to(torch::kFloat64).reshape(y.sizes()) - y.to(torch::kCPU).to(torch::kFloat64)).pow(2).sum().item<double>();
    return static_cast<double>(x.argmax(-1).to(torch::kCPU).eq(y.to(torch::kCPU)).sum().item<long>());
  } catch (const std::exception& e) {  // LibTorch's errors (c10::Error among them), first line only
    const std::string why = e.what();
    return make_error("bad_outputs", "scoring outputs of shape " + c10::str(x.sizes()) + " against targets of shape " +
                                         c10::str(y.sizes()) + ": " + why.substr(0, why.find('\n')));
  }
}

double metric_of(double score_sum, const data::dataset& d) {
  const double per_sample = d.target_values > 0 ? d.target_values : std::max(1, d.target_ids);
  return d.size() > 0 ? score_sum / (static_cast<double>(d.size()) * per_sample) : 0.0;
}

double accuracy(const std::vector<layer_copy>& layers, const data::dataset& d) {
  torch::NoGradGuard no_grad;
  std::vector<int> all(d.size());
  for (int i = 0; i < d.size(); ++i) all[i] = i;
  // Evaluation mode (BatchNorm's running statistics, no dropout), on copies: the layers
  // may be shared with a device that trains them.
  std::vector<torch::nn::Sequential> eval;
  for (const auto& l : layers) {
    eval.push_back(deep_copy(l->module));
    eval.back()->eval();
  }
  // In chunks: the activations of 1,000 samples at once (the CNN's first conv layer alone
  // 100 MB) made the end of a run the controller's peak of memory.
  double sum = 0;
  for (int lo = 0; lo < d.size(); lo += evaluation_chunk) {
    const int hi = std::min(d.size(), lo + evaluation_chunk);
    torch::Tensor x = inputs(d, all, lo, hi)->t;
    for (auto& l : eval) x = l->forward(x.to(device_of(l)));
    auto sc = score(box(x), targets(d, all, lo, hi));
    if (!sc) throw std::runtime_error(sc.err().message);
    sum += *sc;
  }
  return metric_of(sum, d);
}

namespace {
// A layer's whole state as tensors, for comparison: its parameters, its running statistics
// (BatchNorm's), then its optimizer's state parameter by parameter (a step count as a tensor
// too). A side with optimizer state and one without differ in length.
template <class States>
std::vector<torch::Tensor> whole_state(const torch::nn::Sequential& module, const States& states) {
  auto out = module->parameters();
  for (const auto& t : module->buffers()) out.push_back(t);
  for (const auto& held : states) {
    if (!held) continue;
    const torch::optim::OptimizerParamState* st = &*held;  // a unique_ptr's or a plain pointer's
    auto adam = [&](const auto& a) {
      out.push_back(torch::tensor(static_cast<double>(a.step()), torch::kFloat64));
      out.push_back(a.exp_avg());
      out.push_back(a.exp_avg_sq());
      if (a.max_exp_avg_sq().defined()) out.push_back(a.max_exp_avg_sq());
    };
    if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(st)) {
      adam(*a);
    } else if (const auto* w = dynamic_cast<const torch::optim::AdamWParamState*>(st)) {
      adam(*w);
    } else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(st)) {
      if (g->momentum_buffer().defined()) out.push_back(g->momentum_buffer());
    }
  }
  return out;
}
std::vector<torch::Tensor> whole_state(const layer_box& l) { return whole_state(l.module, l.states); }

std::uint64_t hash_of(const std::vector<torch::Tensor>& tensors) {
  data::hasher h;
  for (const auto& t : tensors) {
    const auto c = t.detach().to(torch::kCPU).contiguous();
    h.add(static_cast<std::uint64_t>(c.scalar_type()));
    h.add(static_cast<std::uint64_t>(c.dim()));
    for (auto d : c.sizes()) h.add(static_cast<std::uint64_t>(d));
    h.add(static_cast<const std::uint8_t*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes()));
  }
  return h.value();
}
}  // namespace

std::uint64_t state_hash(const torch::nn::Sequential& module, const std::vector<const torch::optim::OptimizerParamState*>& states) {
  return hash_of(whole_state(module, states));
}

double max_rel_diff(const std::vector<layer_copy>& a, const std::vector<layer_copy>& b) {
  // Models that do not line up, or a NaN anywhere, differ without bound: a comparison that
  // skipped them would pass a broken run.
  const double unbounded = std::numeric_limits<double>::infinity();
  if (a.size() != b.size()) return unbounded;
  double worst = 0;
  for (std::size_t l = 0; l < a.size(); ++l) {
    // A run whose parameters agree but whose optimizer state does not would part later.
    const auto pa = whole_state(*a[l]), pb = whole_state(*b[l]);
    if (pa.size() != pb.size()) return unbounded;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      if (pa[i].sizes() != pb[i].sizes()) return unbounded;
      if (pa[i].numel() == 0) continue;
      const auto a_host = pa[i].to(torch::kCPU, torch::kFloat64), b_host = pb[i].to(torch::kCPU, torch::kFloat64);
      const double scale = b_host.abs().max().item<double>();
      const double diff = (a_host - b_host).abs().max().item<double>();
      const double rel = scale > 0 ? diff / scale : diff;
      if (!(rel <= unbounded)) return unbounded;  // NaN
      worst = std::max(worst, rel);
    }
  }
  return worst;
}

std::vector<std::uint64_t> state_hashes(const std::vector<layer_copy>& layers) {
  std::vector<std::uint64_t> out;
  for (const auto& l : layers) {
    if (l->whole_hash) {  // its optimizer state dropped: the hash taken before
      out.push_back(*l->whole_hash);
      continue;
    }
    out.push_back(hash_of(whole_state(*l)));
  }
  return out;
}

void drop_optimizer_state(const layer_copy& layer, std::optional<std::uint64_t> whole_hash) {
  if (!layer->whole_hash) layer->whole_hash = whole_hash ? *whole_hash : state_hashes({layer}).front();
  layer->states.clear();
}

void set_threads(int intra_op) { at::set_num_threads(std::max(1, intra_op)); }

double benchmark_work(const std::string& place) {
  torch::NoGradGuard no_grad;
  const auto on = torch::TensorOptions(torch::kFloat32).device(device_of(place));
  const auto a = torch::full({96, 96}, 0.01f, on), b = torch::full({96, 96}, 0.02f, on);
  const auto t0 = std::chrono::steady_clock::now();
  auto c = a;
  for (int i = 0; i < 40; ++i) c = torch::mm(c, b) + a;
  volatile float keep = c[0][0].item<float>();  // waits for a GPU's queued work
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dynapar::model
