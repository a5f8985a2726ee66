#include "model/offload.hpp"

#include <stdexcept>

#include "model/boxes.hpp"

namespace dynapar::model {
namespace {

// Each state tensor of a parameter, in a fixed order, through which it can be replaced.
struct slot {
  torch::Tensor value;
  std::function<void(torch::Tensor)> set;
};

std::vector<slot> slots_of(torch::optim::OptimizerParamState& s) {
  std::vector<slot> out;
  if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&s)) {
    out.push_back({a->exp_avg(), [a](torch::Tensor t) { a->exp_avg(std::move(t)); }});
    out.push_back({a->exp_avg_sq(), [a](torch::Tensor t) { a->exp_avg_sq(std::move(t)); }});
    if (a->max_exp_avg_sq().defined()) out.push_back({a->max_exp_avg_sq(), [a](torch::Tensor t) { a->max_exp_avg_sq(std::move(t)); }});
  } else if (auto* g = dynamic_cast<torch::optim::SGDParamState*>(&s)) {
    if (g->momentum_buffer().defined()) out.push_back({g->momentum_buffer(), [g](torch::Tensor t) { g->momentum_buffer(std::move(t)); }});
  }
  return out;
}

}  // namespace

void state_file::keep(torch::optim::Optimizer& opt) {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, std::vector<slot>>> all;  // by parameter
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) {
      auto it = opt.state().find(state_key(p));
      all.emplace_back(p, it == opt.state().end() ? std::vector<slot>{} : slots_of(*it->second));
    }
  if (!file_) {
    // Laid out once, at the first step: AdamW's moments and SGD's buffer are made then, for
    // every parameter with a gradient (each of a layer's parameters has one).
    std::size_t at = 0;
    for (const auto& [p, slots] : all)
      for (const auto& s : slots) {
        offsets_.push_back(at);
        at += mapped_file::whole_pages(static_cast<std::size_t>(s.value.numel()) * s.value.element_size());
      }
    auto f = mapped_file::create(dir_, at);
    if (!f) throw std::runtime_error(f.err().message);  // the device's error (worker::guarded)
    file_ = std::move(*f);
  }
  std::size_t k = 0;
  for (auto& [p, slots] : all)
    for (auto& s : slots) {
      if (k >= offsets_.size()) throw std::runtime_error("offloaded optimizer state grew after its first step");
      char* at = file_->data() + offsets_[k++];
      if (s.value.data_ptr() == at) continue;
      auto in_file = torch::from_blob(at, s.value.sizes(), [keep = file_](void*) {}, s.value.options().device(torch::kCPU));
      in_file.copy_(s.value);
      s.set(in_file);
    }
  file_->release_all();
}

}  // namespace dynapar::model
