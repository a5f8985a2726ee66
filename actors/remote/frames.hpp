// The device messages of actors/messages.hpp as device calls between processes
// (schemas/control.capnp DeviceCall; docs/DISTRIBUTED.md lists each op's fields). Tensors
// become data frames without a copy. Decoding checks every count and index: a malformed call
// is an error value, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "comm/keys.hpp"
#include "comm/packet.hpp"
#include "wire/messages.hpp"

namespace dynapar::actors::remote {

// A call and its tensors as one packet (the envelope's sender is `sender`).
comm::packet pack(const wire::device_call& c, const std::vector<model::tensor>& tensors, const std::string& sender = "");
// A received packet: the envelope, and for a device call its tensors. `what` says which.
struct unpacked {
  wire::envelope env;
  std::vector<model::tensor> tensors;
};
result<unpacked> unpack(const comm::packet& p);

// Emulated links: unlimited bandwidth travels as 0 (the wire takes finite numbers only).
std::vector<double> link_reals(const comm::link_spec& a, const comm::link_spec& b);
comm::link_spec link_from(const std::vector<double>& reals, std::size_t at);

// A stage's part of a step. prev/next/report_to are resolved by the receiving node.
wire::device_call step_call(const stage_task& t, std::vector<model::tensor>& tensors);
result<stage_task> step_from(const wire::device_call& c, const std::vector<model::tensor>& tensors);

wire::device_call report_call(const stage_report& r);
result<stage_report> report_from(const wire::device_call& c);

// A layer: ints [layer, from, to, bytes, layout...] (from -1: sent by the controller).
wire::device_call layer_call(int device, int layer, int from, int to, std::size_t bytes, const model::layer_copy& l,
                             std::vector<model::tensor>& tensors);
struct layer_msg {
  int layer = 0, from = -1, to = 0;
  std::size_t bytes = 0;
  model::layer_copy replica;
};
result<layer_msg> layer_from(const model::model_chain& m, const wire::device_call& c, const std::vector<model::tensor>& tensors);

// Gradients: ints [device, step tag, layers, then per layer: layer, partial sums, tensors each,
// then (level, index) per partial sum].
wire::device_call gradients_reply(const device_gradients& g, std::vector<model::tensor>& tensors);
result<device_gradients> gradients_from(const wire::device_call& c, const std::vector<model::tensor>& tensors);

// The decentralised sum: a holder's task (ints [step tag, layer, micro-batches, exact,
// holders...]; the peers are resolved by the receiving node) and the chunks between holders
// (ints [step tag, layer, gather, from rank, parts, (level, index) per part], a tensor each).
wire::device_call reduce_call(const reduce_task& t);
result<reduce_task> reduce_from(const wire::device_call& c);
wire::device_call part_call(int device, const reduce_part& p, std::vector<model::tensor>& tensors);
result<reduce_part> part_from(const wire::device_call& c, const std::vector<model::tensor>& tensors);

// Data between devices on different nodes (node to node, mesh.hpp): activations,
// gradients, the holders' sums' chunks and migrating layers; never a control call.
bool is_data(const wire::device_call& c);

// Who may send what when the controller serves CURVE (docs/SECURITY.md): nodes join, beat,
// answer device calls and leave; operators inject faults and retire devices. Nothing: allowed;
// else why not. `role` is the sender key's role (none: not authenticated).
std::optional<std::string> refusal(std::optional<comm::key_role> role, const wire::body& b);

// Error text on the wire is capped (wire::decode_limits::max_text).
std::string clip(const std::string& s);

}  // namespace dynapar::actors::remote
