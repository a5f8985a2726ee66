#include "actors/remote/frames.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "wire/codec.hpp"

namespace dynapar::actors::remote {
namespace {

static_assert(wire::ops::stage_op_count == static_cast<int>(schedule::op::recv_grad) + 1,
              "wire::ops::instruction numbers schedule::op");

error bad(const std::string& what, const std::string& why) { return make_error("bad_call", what + ": " + why); }

}  // namespace

std::string clip(const std::string& s) { return s.size() <= 1000 ? s : s.substr(0, 997) + "..."; }

comm::packet pack(const wire::device_call& c, const std::vector<model::tensor>& tensors, const std::string& sender) {
  wire::envelope env;
  env.sender = sender;
  wire::device_call call = c;
  comm::packet p;
  call.tensors.clear();
  for (const auto& t : tensors) {
    model::tensor_meta meta;
    p.blobs.push_back(model::to_blob(t, meta));
    call.tensors.push_back({meta.dtype, meta.shape, meta.strides});
  }
  env.msg = std::move(call);
  p.header = wire::encode(env);
  return p;
}

result<unpacked> unpack(const comm::packet& p) {
  auto env = wire::decode(p.header.data(), p.header.size());
  if (!env) return env.err();
  unpacked out{std::move(*env), {}};
  const auto* call = std::get_if<wire::device_call>(&out.env.msg);
  std::vector<std::size_t> sizes;
  for (const auto& b : p.blobs) sizes.push_back(b.size);
  if (auto st = wire::check_tensor_frames(call ? *call : wire::device_call{}, sizes); !st) return st.err();
  for (std::size_t i = 0; call && i < call->tensors.size(); ++i) {
    auto t = model::from_blob({call->tensors[i].dtype, call->tensors[i].shape, call->tensors[i].strides}, p.blobs[i]);
    if (!t) return make_error(t.err().code, "tensor " + std::to_string(i) + ": " + t.err().message);
    out.tensors.push_back(std::move(*t));
  }
  return out;
}

wire::device_call call_to(int device, wire::device_op op) {
  wire::device_call c;
  c.device = device;
  c.op = std::move(op);
  return c;
}

wire::ops::link link_of(const comm::link_spec& l) { return {std::isfinite(l.bw) ? l.bw : 0.0, l.lat}; }

comm::link_spec link_from(const wire::ops::link& l) {
  comm::link_spec out;
  out.bw = l.bandwidth > 0 ? l.bandwidth : std::numeric_limits<double>::infinity();
  out.lat = std::max(0.0, l.latency);
  return out;
}

wire::ops::step step_of(const stage_task& t, std::vector<model::tensor>& tensors, bool node_has_data) {
  wire::ops::step s;
  static_cast<step::stage_work&>(s) = t;
  s.prev = t.prev_id;
  s.next = t.next_id;
  s.inputs = static_cast<int>(t.inputs.size());
  s.targets = static_cast<int>(t.targets.size());
  for (const auto& in : t.program) s.program.push_back({static_cast<int>(in.kind), in.micro});
  s.to_prev = link_of(t.to_prev);
  s.to_next = link_of(t.to_next);
  const bool by_ids = node_has_data && !t.samples.empty();
  s.inputs_from_samples = by_ids && !t.inputs.empty();
  s.targets_from_samples = by_ids && !t.targets.empty();
  if (!by_ids) s.samples.clear();  // the tensors travel instead
  if (!s.inputs_from_samples) s.ahead.clear();  // a hint only to a node that builds inputs
  tensors.clear();
  if (!s.inputs_from_samples) tensors = t.inputs;
  if (!s.targets_from_samples) tensors.insert(tensors.end(), t.targets.begin(), t.targets.end());
  if (s.inputs_from_samples) s.inputs = 0;
  if (s.targets_from_samples) s.targets = 0;
  return s;
}

result<stage_task> task_from(const wire::ops::step& s, const std::vector<model::tensor>& tensors, const data::dataset* d) {
  if (s.inputs < 0 || s.targets < 0 || static_cast<std::size_t>(s.inputs + s.targets) != tensors.size())
    return bad("a step", "input and target counts do not match the tensors");
  stage_task t;
  static_cast<step::stage_work&>(t) = s;
  t.prev_id = s.prev;
  t.next_id = s.next;
  for (const auto& in : s.program) t.program.push_back({static_cast<schedule::op>(in.kind), in.micro});
  t.to_prev = link_from(s.to_prev);
  t.to_next = link_from(s.to_next);
  t.inputs.assign(tensors.begin(), tensors.begin() + s.inputs);
  t.targets.assign(tensors.begin() + s.inputs, tensors.end());
  if (!s.inputs_from_samples && !s.targets_from_samples) {  // the ids come only with those flags
    t.samples.clear();
    return t;
  }
  if (!d) return bad("a step", "names its samples, but this node holds no copy of the job's data set");
  // An evaluation's samples are of the validation set (`d` then), with no augmentation.
  const std::int64_t draw = s.evaluate ? -1 : s.train_step;
  for (const auto& ids : s.samples)
    for (int id : ids)
      if (id < 0 || id >= d->size())
        return bad("a step", "names sample " + std::to_string(id) + ", beyond this node's data set of " + std::to_string(d->size()));
  const std::size_t m = s.samples.size();
  if ((s.inputs_from_samples && !t.inputs.empty()) || (s.targets_from_samples && !t.targets.empty()))
    return bad("a step", "carries tensors for what it says comes from samples");
  try {
    for (std::size_t k = 0; k < m; ++k) {
      const int n = static_cast<int>(s.samples[k].size());
      if (s.inputs_from_samples) t.inputs.push_back(model::inputs(*d, s.samples[k], 0, n, draw));
      if (s.targets_from_samples) t.targets.push_back(model::targets(*d, s.samples[k], 0, n));
    }
  } catch (const std::exception& e) {  // a data file that changed under the run (data/dataset.hpp)
    return bad("a step", std::string("reads its samples: ") + e.what());
  }
  // The next step's likely samples decode while this one runs (ids past the set are ignored).
  if (s.inputs_from_samples && !s.evaluate && !s.ahead.empty() && d->store) d->store->ahead(s.ahead, s.train_step + 1);
  return t;
}

stage_report report_of(stage_report r) {
  r.error = clip(r.error);
  return r;
}

wire::ops::hold layer_of(int layer, int from, int to, std::size_t bytes, const model::layer_copy& l,
                         std::vector<model::tensor>& tensors) {
  auto w = model::to_wire(l);
  tensors = std::move(w.tensors);
  return {layer, from, to, bytes, std::move(w.layout)};
}

wire::ops::hold placed_layer(int layer, int to, const model::layer_copy& l, const std::vector<std::uint64_t>& fresh,
                             std::vector<model::tensor>& tensors) {
  if (layer >= 0 && static_cast<std::size_t>(layer) < fresh.size()) {
    const auto h = l ? model::state_hashes({l}).front() : fresh[static_cast<std::size_t>(layer)];  // null: the fresh layer
    if (h == fresh[static_cast<std::size_t>(layer)]) {
      wire::ops::hold out{layer, -1, to, 0, {}};
      out.built = h;
      tensors.clear();
      return out;
    }
  }
  return layer_of(layer, -1, to, 0, l, tensors);
}

result<layer_msg> layer_from(const model::layer_source& src, const wire::ops::hold& h, const std::vector<model::tensor>& tensors) {
  layer_msg out{h.layer, h.from, h.to, static_cast<std::size_t>(h.bytes), nullptr};
  if (h.built != 0) {
    if (!tensors.empty()) return bad("hold", "a layer to build comes with tensors");
    auto l = src.fresh(h.layer);
    if (!l) return l.err();
    if (const auto mine = model::state_hashes({*l}).front(); mine != h.built)
      return make_error("bad_model", "layer " + std::to_string(h.layer) + " built here from the job's model and seed differs from the controller's " +
                                         "(state hash " + std::to_string(mine) + ", not " + std::to_string(h.built) +
                                         "): another model file or another LibTorch on this node");
    out.replica = std::move(*l);
    return out;
  }
  auto l = src.from_wire(h.layer, model::layer_wire{h.layout, tensors});
  if (!l) return l.err();
  out.replica = std::move(*l);
  return out;
}

wire::ops::gradient_set gradients_of(const device_gradients& g, std::vector<model::tensor>& tensors) {
  wire::ops::gradient_set w{g.device, g.tag, {}};
  for (const auto& [l, parts] : g.layers) {
    wire::ops::layer_parts lp{l, parts.empty() ? 0 : static_cast<int>(parts.front().grads.size()), {}};
    for (const auto& p : parts) {
      lp.parts.push_back({p.level, p.index});
      tensors.insert(tensors.end(), p.grads.begin(), p.grads.end());
    }
    w.layers.push_back(std::move(lp));
  }
  return w;
}

result<device_gradients> gradients_from(const wire::ops::gradient_set& w, const std::vector<model::tensor>& tensors) {
  device_gradients g{w.device, w.tag, {}};
  std::size_t next = 0;
  for (const auto& lp : w.layers) {
    std::vector<model::grad_part> parts;
    for (const auto& place : lp.parts) {
      if (lp.tensors_per_part < 0 || tensors.size() - next < static_cast<std::size_t>(lp.tensors_per_part))
        return bad("gradients", "the counts do not match the tensors");
      model::grad_part p{place.level, place.index, {}};
      p.grads.assign(tensors.begin() + static_cast<std::ptrdiff_t>(next), tensors.begin() + static_cast<std::ptrdiff_t>(next + lp.tensors_per_part));
      next += static_cast<std::size_t>(lp.tensors_per_part);
      parts.push_back(std::move(p));
    }
    g.layers.emplace_back(lp.layer, std::move(parts));
  }
  if (next != tensors.size()) return bad("gradients", "more tensors than the counts say");
  return g;
}

wire::ops::reduce reduce_of(const reduce_task& t) {
  return {t.tag, t.layer, t.micro_batches, t.exact, t.holders, t.store, t.generation, t.layers, t.norms_divisor};
}

reduce_task reduce_from(const wire::ops::reduce& r) {
  reduce_task t;
  t.tag = r.tag;
  t.layer = r.layer;
  t.micro_batches = r.micro_batches;
  t.exact = r.exact;
  t.holders = r.holders;
  t.store = r.store;
  t.generation = r.generation;
  t.norms_divisor = r.norms_divisor;
  t.layers = r.layers;
  return t;
}

wire::ops::reduce_part part_of(const reduce_part& p, std::vector<model::tensor>& tensors) {
  wire::ops::reduce_part w{p.tag, p.layer, p.msg.gather, p.msg.from, {}, p.device};
  for (const auto& part : p.msg.parts) {
    w.parts.push_back({part.level, part.index});
    tensors.insert(tensors.end(), part.grads.begin(), part.grads.end());
  }
  return w;
}

result<reduce_part> part_from(const wire::ops::reduce_part& w, const std::vector<model::tensor>& tensors) {
  if (w.parts.size() != tensors.size()) return bad("a sum's chunk", "the part count does not match its tensors");
  reduce_part p;
  p.tag = w.tag;
  p.layer = w.layer;
  p.msg.gather = w.gather;
  p.msg.from = w.from;
  p.device = w.device;
  for (std::size_t i = 0; i < w.parts.size(); ++i) p.msg.parts.push_back({w.parts[i].level, w.parts[i].index, {tensors[i]}});
  return p;
}

int data_source(const wire::device_call& c) {
  if (const auto* a = std::get_if<wire::ops::activation>(&c.op)) return a->from;
  if (const auto* g = std::get_if<wire::ops::gradient>(&c.op)) return g->from;
  if (const auto* h = std::get_if<wire::ops::hold>(&c.op)) return h->from;
  if (const auto* p = std::get_if<wire::ops::reduce_part>(&c.op)) return p->device;
  return -1;
}

bool is_data(const wire::device_call& c) {
  if (c.id != 0) return false;  // an answer (a layer copy's answer is a layer too)
  if (const auto* h = std::get_if<wire::ops::hold>(&c.op)) return h->from >= 0;
  return std::holds_alternative<wire::ops::activation>(c.op) || std::holds_alternative<wire::ops::gradient>(c.op) ||
         std::holds_alternative<wire::ops::reduce_part>(c.op);
}

std::optional<std::string> refusal(std::optional<comm::key_role> role, const wire::body& b) {
  if (!role) return "an unauthenticated sender";
  const bool node = *role == comm::key_role::node, op = *role == comm::key_role::operator_;
  if (std::holds_alternative<wire::fault_command>(b)) {
    if (!op) return "a fault command needs an operator key";
  } else if (std::holds_alternative<wire::leave_msg>(b)) {
    if (!node && !op) return "a leave needs a node or operator key";
  } else if (!node) {
    return "only a node key may join, beat or answer device calls";
  }
  return std::nullopt;
}

}  // namespace dynapar::actors::remote
