// Tensors and layers as bytes for other processes (api.hpp: to_blob, from_wire).
#include <cstring>

#include "model/boxes.hpp"

namespace dynapar::model {
namespace {

struct type_entry {
  std::uint8_t code;
  torch::ScalarType type;
};
constexpr type_entry types[] = {{0, torch::kFloat32}, {1, torch::kFloat64}, {2, torch::kInt64}, {3, torch::kInt32}, {4, torch::kUInt8},
                               {5, torch::kBFloat16}};  // a bf16 job's activations between stages

// Layout codes of a parameter's optimizer state.
constexpr std::int64_t no_state = 0, adam_state = 1, sgd_state = 2, adamw_state = 3;
constexpr std::int64_t max_dims = 8, max_elements = std::int64_t{1} << 34;

}  // namespace

tensor filled_tensor(std::int64_t n, float value) { return box(torch::full({n}, value)); }

blob to_blob(const tensor& t, tensor_meta& meta) {
  meta = {};
  const torch::Tensor& s = t->t;
  for (const auto& e : types)
    if (e.type == s.scalar_type()) meta.dtype = e.code;
  meta.shape = s.sizes().vec();
  // A view travels as it is, its span of storage and its strides (boxes.hpp: layout_extent):
  // the receiver's next op then rounds as the sender's would have (docs/MODELS.md, "Exact whatever the cut").
  torch::Tensor c;
  if (plain_layout(s)) {
    c = s.to(torch::kCPU).contiguous();  // a GPU tensor travels from the host
  } else {
    meta.strides = s.strides().vec();
    c = layout_span(s).to(torch::kCPU).contiguous();
  }
  // The blob owns a handle on the (contiguous) storage: no copy unless it was on a GPU.
  auto owner = std::make_shared<torch::Tensor>(c);
  return blob{owner->data_ptr(), static_cast<std::size_t>(owner->nbytes()), owner};
}

result<tensor> from_blob(const tensor_meta& meta, const blob& data) {
  const type_entry* type = nullptr;
  for (const auto& e : types)
    if (e.code == meta.dtype) type = &e;
  if (!type) return make_error("bad_tensor", "unknown element type " + std::to_string(meta.dtype));
  if (meta.shape.size() > static_cast<std::size_t>(max_dims)) return make_error("bad_tensor", "more than 8 dimensions");
  if (!meta.strides.empty() && meta.strides.size() != meta.shape.size())
    return make_error("bad_tensor", std::to_string(meta.strides.size()) + " strides for " + std::to_string(meta.shape.size()) + " dimensions");
  // The elements the frame holds: the shape's, or the span its strides reach.
  std::int64_t n = 1, far = 0;
  for (std::size_t i = 0; i < meta.shape.size(); ++i) {
    const auto d = meta.shape[i];
    if (d < 0 || d > max_elements || (d > 0 && n > max_elements / d)) return make_error("bad_tensor", "shape out of range");
    n *= d;
    if (meta.strides.empty()) continue;
    const auto s = meta.strides[i];
    if (s < 0 || s > max_elements) return make_error("bad_tensor", "stride out of range");
    if (d > 0 && (d - 1 > 0 && s > (max_elements - far) / (d - 1))) return make_error("bad_tensor", "strides reach past 2^34 elements");
    far += d > 0 ? (d - 1) * s : 0;
  }
  const std::int64_t stored = meta.strides.empty() || n == 0 ? n : far + 1;
  const auto want = static_cast<std::size_t>(stored) * c10::elementSize(type->type);
  if (want != data.size)
    return make_error("bad_tensor", "shape needs " + std::to_string(want) + " bytes but the frame has " + std::to_string(data.size));
  if (n == 0) return box(torch::empty(meta.shape, type->type));
  const auto flat = [&]() -> torch::Tensor {
    // Frames need not be aligned for the element type: copy those that are not.
    if (reinterpret_cast<std::uintptr_t>(data.data) % c10::elementSize(type->type) != 0) {
      auto t = torch::empty({stored}, type->type);
      std::memcpy(t.data_ptr(), data.data, want);
      return t;
    }
    auto keep = data.owner;
    return torch::from_blob(const_cast<void*>(data.data), {stored}, [keep](void*) mutable { keep.reset(); },
                            torch::TensorOptions().dtype(type->type));
  }();
  return box(meta.strides.empty() ? flat.view(meta.shape) : flat.as_strided(meta.shape, meta.strides, 0));
}

layer_wire to_wire(const layer_copy& l) {
  layer_wire w;
  const auto params = l->module->parameters();
  w.layout.push_back(static_cast<std::int64_t>(params.size()));
  for (const auto& p : params) w.tensors.push_back(box(p.detach()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto* st = i < l->states.size() ? l->states[i].get() : nullptr;
    // Adam's and AdamW's states hold the same (AdamW's is its own type).
    auto put_adam = [&](std::int64_t kind, const auto& a) {
      const bool has_max = a.max_exp_avg_sq().defined();
      w.layout.insert(w.layout.end(), {kind, a.step(), has_max ? 1 : 0});
      w.tensors.push_back(box(a.exp_avg()));
      w.tensors.push_back(box(a.exp_avg_sq()));
      if (has_max) w.tensors.push_back(box(a.max_exp_avg_sq()));
    };
    if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(st)) {
      put_adam(adam_state, *a);
    } else if (const auto* aw = dynamic_cast<const torch::optim::AdamWParamState*>(st)) {
      put_adam(adamw_state, *aw);
    } else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(st)) {
      const bool has_buf = g->momentum_buffer().defined();
      w.layout.insert(w.layout.end(), {sgd_state, has_buf ? 1 : 0});
      if (has_buf) w.tensors.push_back(box(g->momentum_buffer()));
    } else {
      w.layout.push_back(no_state);
    }
  }
  // Running statistics (BatchNorm's) last, counted: a layer without them sends what it did.
  if (const auto bufs = l->module->buffers(); !bufs.empty()) {
    w.layout.push_back(static_cast<std::int64_t>(bufs.size()));
    for (const auto& b : bufs) w.tensors.push_back(box(b.detach()));
  }
  return w;
}

result<layer_copy> from_wire(const model_chain& m, int layer, const layer_wire& w) {
  if (layer < 0 || layer >= static_cast<int>(m.layers.size())) return make_error("bad_layer", "no layer " + std::to_string(layer));
  const std::string where = "layer " + std::to_string(layer) + ": ";
  auto out = std::make_shared<layer_box>();
  out->module = layer_module(m, layer);
  auto params = out->module->parameters();
  std::size_t at = 0, next = 0;  // layout and tensor cursors
  auto take_int = [&](std::int64_t& v) {
    if (at >= w.layout.size()) return false;
    v = w.layout[at++];
    return true;
  };
  // Each tensor must be shaped and typed like the parameter it belongs to.
  auto take = [&](const torch::Tensor& like, torch::Tensor& t) -> status {
    if (next >= w.tensors.size() || !w.tensors[next]) return make_error("bad_layer", where + "fewer tensors than its layout says");
    t = w.tensors[next++]->t;
    if (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type())
      return make_error("bad_layer", where + "a tensor does not match its parameter's shape or type");
    return ok_status();
  };
  // Adam's or AdamW's state: step, whether it has a maximum (amsgrad), then its tensors.
  auto take_adam = [&](auto s, const torch::Tensor& p) -> result<std::unique_ptr<torch::optim::OptimizerParamState>> {
    std::int64_t step = 0, has_max = 0;
    if (!take_int(step) || !take_int(has_max) || step < 0) return make_error("bad_layer", where + "bad Adam state");
    s->step(step);
    torch::Tensor a, b, c;
    if (auto st = take(p, a); !st) return st.err();
    if (auto st = take(p, b); !st) return st.err();
    s->exp_avg(a.clone());
    s->exp_avg_sq(b.clone());
    if (has_max) {
      if (auto st = take(p, c); !st) return st.err();
      s->max_exp_avg_sq(c.clone());
    }
    return std::unique_ptr<torch::optim::OptimizerParamState>(std::move(s));
  };
  std::int64_t n = 0;
  if (!take_int(n) || n != static_cast<std::int64_t>(params.size()))
    return make_error("bad_layer", where + "the sender's layer has a different number of parameters");
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      torch::Tensor t;
      if (auto st = take(p, t); !st) return st.err();
      p.copy_(t);
    }
  }
  for (const auto& p : params) {
    std::int64_t kind = 0;
    if (!take_int(kind)) return make_error("bad_layer", where + "layout ends early");
    if (kind == no_state) {
      out->states.push_back(nullptr);
    } else if (kind == adam_state || kind == adamw_state) {
      auto s = kind == adam_state ? take_adam(std::make_unique<torch::optim::AdamParamState>(), p)
                                  : take_adam(std::make_unique<torch::optim::AdamWParamState>(), p);
      if (!s) return s.err();
      out->states.push_back(std::move(*s));
    } else if (kind == sgd_state) {
      std::int64_t has_buf = 0;
      if (!take_int(has_buf)) return make_error("bad_layer", where + "bad SGD state");
      auto s = std::make_unique<torch::optim::SGDParamState>();
      if (has_buf) {
        torch::Tensor b;
        if (auto st = take(p, b); !st) return st.err();
        s->momentum_buffer(b.clone());
      }
      out->states.push_back(std::move(s));
    } else {
      return make_error("bad_layer", where + "unknown optimizer state kind " + std::to_string(kind));
    }
  }
  if (auto bufs = out->module->buffers(); !bufs.empty()) {
    std::int64_t count = 0;
    if (!take_int(count) || count != static_cast<std::int64_t>(bufs.size()))
      return make_error("bad_layer", where + "the sender's layer has a different number of buffers");
    torch::NoGradGuard no_grad;
    for (auto& b : bufs) {
      torch::Tensor t;
      if (auto st = take(b, t); !st) return st.err();
      b.copy_(t);
    }
  }
  if (at != w.layout.size() || next != w.tensors.size()) return make_error("bad_layer", where + "more data than its layout says");
  return layer_copy(out);
}

}  // namespace dynapar::model
