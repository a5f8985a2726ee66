#include "actors/remote/frames.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "wire/codec.hpp"

namespace dynapar::actors::remote {
namespace {

error bad(const wire::device_call& c, const std::string& why) {
  return make_error("bad_call", "device call (op " + std::to_string(static_cast<int>(c.op)) + ", device " +
                                    std::to_string(c.device) + "): " + why);
}

bool fits_int(std::int64_t v) { return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(); }

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
    call.tensors.push_back({meta.dtype, meta.shape});
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
  const std::size_t want = call ? call->tensors.size() : 0;
  if (p.blobs.size() != want)
    return make_error("malformed", "the message announces " + std::to_string(want) + " tensors but carries " +
                                       std::to_string(p.blobs.size()) + " data frames");
  for (std::size_t i = 0; i < want; ++i) {
    auto t = model::from_blob({call->tensors[i].dtype, call->tensors[i].shape}, p.blobs[i]);
    if (!t) return make_error(t.err().code, "tensor " + std::to_string(i) + ": " + t.err().message);
    out.tensors.push_back(std::move(*t));
  }
  return out;
}

std::vector<double> link_reals(const comm::link_spec& a, const comm::link_spec& b) {
  auto bw = [](double v) { return std::isfinite(v) ? v : 0.0; };
  return {bw(a.bw), a.lat, bw(b.bw), b.lat};
}

comm::link_spec link_from(const std::vector<double>& reals, std::size_t at) {
  comm::link_spec l;
  if (at + 1 >= reals.size()) return l;
  l.bw = reals[at] > 0 ? reals[at] : std::numeric_limits<double>::infinity();
  l.lat = std::max(0.0, reals[at + 1]);
  return l;
}

// ints: [step, lo, hi, prev_id, next_id, inputs, targets, then (op, micro) per instruction]
wire::device_call step_call(const stage_task& t, std::vector<model::tensor>& tensors) {
  wire::device_call c;
  c.op = wire::device_op::step;
  c.ints = {t.step, t.lo, t.hi, t.prev_id, t.next_id, static_cast<std::int64_t>(t.inputs.size()),
            static_cast<std::int64_t>(t.targets.size()), t.first_micro, t.accumulate ? 1 : 0};
  for (const auto& in : t.program) {
    c.ints.push_back(static_cast<std::int64_t>(in.kind));
    c.ints.push_back(in.micro);
  }
  c.reals = link_reals(t.to_prev, t.to_next);
  tensors = t.inputs;
  tensors.insert(tensors.end(), t.targets.begin(), t.targets.end());
  return c;
}

result<stage_task> step_from(const wire::device_call& c, const std::vector<model::tensor>& tensors) {
  if (c.ints.size() < 9 || (c.ints.size() - 9) % 2 != 0 || c.reals.size() != 4) return bad(c, "a step needs 9 + 2n integers and 4 reals");
  for (std::size_t i = 1; i < c.ints.size(); ++i)
    if (!fits_int(c.ints[i])) return bad(c, "an integer out of range");
  stage_task t;
  t.step = c.ints[0];
  t.lo = static_cast<int>(c.ints[1]);
  t.hi = static_cast<int>(c.ints[2]);
  t.prev_id = static_cast<int>(c.ints[3]);
  t.next_id = static_cast<int>(c.ints[4]);
  const auto n_in = c.ints[5], n_tg = c.ints[6];
  if (n_in < 0 || n_tg < 0 || static_cast<std::size_t>(n_in + n_tg) != tensors.size())
    return bad(c, "input and target counts do not match the tensors");
  if (t.lo < 0 || t.hi <= t.lo) return bad(c, "bad layer range");
  if (c.ints[7] < 0) return bad(c, "a negative first micro-batch");
  t.first_micro = c.ints[7];
  if (c.ints[8] != 0 && c.ints[8] != 1) return bad(c, "the accumulate flag is neither 0 nor 1");
  t.accumulate = c.ints[8] == 1;
  for (std::size_t i = 9; i < c.ints.size(); i += 2) {
    const auto k = c.ints[i];
    if (k < 0 || k > static_cast<std::int64_t>(schedule::op::optimizer_step)) return bad(c, "unknown instruction");
    t.program.push_back({static_cast<schedule::op>(k), static_cast<int>(c.ints[i + 1])});
  }
  t.to_prev = link_from(c.reals, 0);
  t.to_next = link_from(c.reals, 2);
  t.inputs.assign(tensors.begin(), tensors.begin() + n_in);
  t.targets.assign(tensors.begin() + n_in, tensors.end());
  return t;
}

// ints: [device, step, messages, then (from, to, transfers) per link]; reals: [compute, wait,
// loss, then (bytes, busy) per link]; text: the error.
wire::device_call report_call(const stage_report& r) {
  wire::device_call c;
  c.op = wire::device_op::stage_report;
  c.device = r.device;
  c.ints = {r.device, r.step, r.messages};
  c.reals = {r.compute_s, r.wait_s, r.loss_sum};
  for (const auto& l : r.links) {
    c.ints.insert(c.ints.end(), {l.from, l.to, l.transfers});
    c.reals.insert(c.reals.end(), {l.bytes, l.busy_s});
  }
  c.text = clip(r.error);
  return c;
}

result<stage_report> report_from(const wire::device_call& c) {
  if (c.ints.size() < 3 || (c.ints.size() - 3) % 3 != 0 || c.reals.size() != 3 + 2 * ((c.ints.size() - 3) / 3))
    return bad(c, "a stage report needs 3 + 3n integers and 3 + 2n reals");
  for (std::size_t i = 0; i < c.ints.size(); ++i)
    if (i != 1 && !fits_int(c.ints[i])) return bad(c, "an integer out of range");
  stage_report r;
  r.device = static_cast<int>(c.ints[0]);
  r.step = c.ints[1];
  r.messages = static_cast<int>(c.ints[2]);
  r.compute_s = c.reals[0];
  r.wait_s = c.reals[1];
  r.loss_sum = c.reals[2];
  for (std::size_t k = 0; 3 + 3 * k < c.ints.size(); ++k)
    r.links.push_back({static_cast<int>(c.ints[3 + 3 * k]), static_cast<int>(c.ints[4 + 3 * k]), c.reals[3 + 2 * k],
                       c.reals[4 + 2 * k], static_cast<int>(c.ints[5 + 3 * k])});
  r.error = c.text;
  return r;
}

wire::device_call layer_call(int device, int layer, int from, int to, std::size_t bytes, const model::layer_copy& l,
                             std::vector<model::tensor>& tensors) {
  wire::device_call c;
  c.op = wire::device_op::hold;
  c.device = device;
  auto w = model::to_wire(l);
  c.ints = {layer, from, to, static_cast<std::int64_t>(bytes)};
  c.ints.insert(c.ints.end(), w.layout.begin(), w.layout.end());
  tensors = std::move(w.tensors);
  return c;
}

result<layer_msg> layer_from(const model::model_chain& m, const wire::device_call& c, const std::vector<model::tensor>& tensors) {
  if (c.ints.size() < 4) return bad(c, "a layer needs 4 integers and its layout");
  for (int i = 0; i < 3; ++i)
    if (!fits_int(c.ints[i])) return bad(c, "an integer out of range");
  if (c.ints[3] < 0) return bad(c, "negative size");
  layer_msg out{static_cast<int>(c.ints[0]), static_cast<int>(c.ints[1]), static_cast<int>(c.ints[2]),
                static_cast<std::size_t>(c.ints[3]), nullptr};
  model::layer_wire w{std::vector<std::int64_t>(c.ints.begin() + 4, c.ints.end()), tensors};
  auto l = model::from_wire(m, out.layer, w);
  if (!l) return l.err();
  out.replica = std::move(*l);
  return out;
}

wire::device_call gradients_reply(const device_gradients& g, std::vector<model::tensor>& tensors) {
  wire::device_call c;
  c.op = wire::device_op::reply;
  c.device = g.device;
  c.ints = {g.device, g.step, static_cast<std::int64_t>(g.layers.size())};
  for (const auto& [l, parts] : g.layers) {
    c.ints.push_back(l);
    c.ints.push_back(static_cast<std::int64_t>(parts.size()));
    c.ints.push_back(parts.empty() ? 0 : static_cast<std::int64_t>(parts.front().grads.size()));
    for (const auto& p : parts) {
      c.ints.push_back(p.level);
      c.ints.push_back(p.index);
      tensors.insert(tensors.end(), p.grads.begin(), p.grads.end());
    }
  }
  return c;
}

result<device_gradients> gradients_from(const wire::device_call& c, const std::vector<model::tensor>& tensors) {
  if (c.ints.size() < 3 || !fits_int(c.ints[0]) || c.ints[2] < 0 || c.ints[2] > 1 << 20) return bad(c, "gradients need 3 integers first");
  device_gradients g{static_cast<int>(c.ints[0]), c.ints[1], {}};
  std::size_t at = 3, next = 0;
  for (std::int64_t k = 0; k < c.ints[2]; ++k) {
    if (c.ints.size() < at + 3) return bad(c, "a layer's gradient counts are cut short");
    const auto l = c.ints[at], n = c.ints[at + 1], per = c.ints[at + 2];
    at += 3;
    if (!fits_int(l) || n < 0 || per < 0 || n > 128 || per > (1 << 20) || c.ints.size() < at + 2 * static_cast<std::size_t>(n) ||
        n * per > static_cast<std::int64_t>(tensors.size() - next))
      return bad(c, "gradient counts do not match the tensors");
    std::vector<model::grad_part> parts(static_cast<std::size_t>(n));
    for (auto& p : parts) {
      const auto level = c.ints[at], index = c.ints[at + 1];
      at += 2;
      if (level < 0 || level > 62 || index < 0 || index > (std::int64_t{1} << 40)) return bad(c, "a partial sum's place in the tree is out of range");
      p.level = static_cast<int>(level);
      p.index = index;
      for (std::int64_t i = 0; i < per; ++i) p.grads.push_back(tensors[next++]);
    }
    g.layers.emplace_back(static_cast<int>(l), std::move(parts));
  }
  if (at != c.ints.size()) return bad(c, "more integers than the gradient counts say");
  if (next != tensors.size()) return bad(c, "more tensors than the gradient counts say");
  return g;
}

wire::device_call reduce_call(const reduce_task& t) {
  wire::device_call c;
  c.op = wire::device_op::reduce;
  c.ints = {t.step, t.layer, t.micro_batches, t.exact ? 1 : 0};
  c.ints.insert(c.ints.end(), t.holders.begin(), t.holders.end());
  return c;
}

result<reduce_task> reduce_from(const wire::device_call& c) {
  if (c.ints.size() < 5 || c.ints.size() > 4 + 4096) return bad(c, "a sum needs its step, layer, micro-batches, exact and 1-4096 holders");
  reduce_task t;
  t.step = c.ints[0];
  if (!fits_int(c.ints[1]) || c.ints[1] < 0) return bad(c, "the layer is out of range");
  t.layer = static_cast<int>(c.ints[1]);
  if (c.ints[2] < 1 || c.ints[2] > (std::int64_t{1} << 40)) return bad(c, "the micro-batch count is out of range");
  t.micro_batches = c.ints[2];
  t.exact = c.ints[3] != 0;
  for (std::size_t i = 4; i < c.ints.size(); ++i) {
    if (!fits_int(c.ints[i]) || c.ints[i] < 0) return bad(c, "a holder id is out of range");
    const int id = static_cast<int>(c.ints[i]);
    if (std::find(t.holders.begin(), t.holders.end(), id) != t.holders.end()) return bad(c, "holder " + std::to_string(id) + " is named twice");
    t.holders.push_back(id);
  }
  return t;
}

wire::device_call part_call(int device, const reduce_part& p, std::vector<model::tensor>& tensors) {
  wire::device_call c;
  c.op = wire::device_op::reduce_part;
  c.device = device;
  c.ints = {p.step, p.layer, p.msg.gather ? 1 : 0, p.msg.from, static_cast<std::int64_t>(p.msg.parts.size())};
  for (const auto& part : p.msg.parts) {
    c.ints.push_back(part.level);
    c.ints.push_back(part.index);
    tensors.insert(tensors.end(), part.grads.begin(), part.grads.end());
  }
  return c;
}

result<reduce_part> part_from(const wire::device_call& c, const std::vector<model::tensor>& tensors) {
  if (c.ints.size() < 5) return bad(c, "a sum's chunk needs its step, layer, phase, sender and part count");
  const auto n = c.ints[4];
  if (n < 0 || n > 128 || c.ints.size() != 5 + 2 * static_cast<std::size_t>(n) || tensors.size() != static_cast<std::size_t>(n))
    return bad(c, "a sum's chunk: the part count does not match its places and tensors");
  if (!fits_int(c.ints[1]) || c.ints[1] < 0 || !fits_int(c.ints[3]) || c.ints[3] < 0) return bad(c, "a sum's chunk: layer or sender out of range");
  reduce_part p;
  p.step = c.ints[0];
  p.layer = static_cast<int>(c.ints[1]);
  p.msg.gather = c.ints[2] != 0;
  p.msg.from = static_cast<int>(c.ints[3]);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto level = c.ints[5 + 2 * i], index = c.ints[6 + 2 * i];
    if (level < 0 || level > 62 || index < 0 || index > (std::int64_t{1} << 40)) return bad(c, "a partial sum's place in the tree is out of range");
    p.msg.parts.push_back({static_cast<int>(level), index, {tensors[static_cast<std::size_t>(i)]}});
  }
  return p;
}

bool is_data(const wire::device_call& c) {
  using op = wire::device_op;
  return c.op == op::activation || c.op == op::gradient || c.op == op::reduce_part ||
         (c.op == op::hold && c.ints.size() >= 2 && c.ints[1] >= 0);
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
