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
#include "data/dataset.hpp"
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

// Between actor messages and the wire's device operations (wire/device_call.hpp). A call
// that came through unpack() has been checked by runtime/wire (counts, ranges, places in
// the tree); these only guard the tensor counts they index by.
wire::device_call call_to(int device, wire::device_op op);

wire::ops::link link_of(const comm::link_spec& l);
comm::link_spec link_from(const wire::ops::link& l);

// A stage's part of a step. prev/next/report_to are resolved by the receiving node. With
// `node_has_data` (the node proved it holds the job's data set) and the task's sample ids,
// the inputs and targets travel as those ids; task_from builds them from `data`, the split
// the task names (an evaluation: the validation set; null: the
// node holds none, and such a step is an error naming why), bit for bit what model::inputs
// and model::targets give the sender.
wire::ops::step step_of(const stage_task& t, std::vector<model::tensor>& tensors, bool node_has_data = false);
result<stage_task> task_from(const wire::ops::step& s, const std::vector<model::tensor>& tensors, const data::dataset* data = nullptr);

// A stage's report as it goes on the wire: its error cut to 1,000 characters.
stage_report report_of(stage_report r);

// A layer with its optimizer state (from -1: sent by the controller).
wire::ops::hold layer_of(int layer, int from, int to, std::size_t bytes, const model::layer_copy& l,
                         std::vector<model::tensor>& tensors);
// A layer the controller places: when the copy is still the model's layer before any step
// (its state hashes to `fresh[layer]`, model::state_hashes), the node builds it itself from
// the job's model and seed, and no tensor travels (issue 50); else as layer_of. A null copy
// is the fresh layer (the caller checked that `fresh` has it).
wire::ops::hold placed_layer(int layer, int to, const model::layer_copy& l, const std::vector<std::uint64_t>& fresh,
                             std::vector<model::tensor>& tensors);
struct layer_msg {
  int layer = 0, from = -1, to = 0;
  std::size_t bytes = 0;
  model::layer_copy replica;
};
// The layer's shapes come from `src`; a built layer (hold::built) is src's fresh one, checked
// against the sender's hash.
result<layer_msg> layer_from(const model::layer_source& src, const wire::ops::hold& h, const std::vector<model::tensor>& tensors);

// A device's gradients as the exact sum's partial sums, and the holders' sum.
wire::ops::gradient_set gradients_of(const device_gradients& g, std::vector<model::tensor>& tensors);
result<device_gradients> gradients_from(const wire::ops::gradient_set& g, const std::vector<model::tensor>& tensors);
wire::ops::reduce reduce_of(const reduce_task& t);
reduce_task reduce_from(const wire::ops::reduce& r);  // peers are resolved by the receiving node
wire::ops::reduce_part part_of(const reduce_part& p, std::vector<model::tensor>& tensors);
result<reduce_part> part_from(const wire::ops::reduce_part& p, const std::vector<model::tensor>& tensors);

// Data between devices on different nodes (node to node, mesh.hpp): activations,
// gradients, the holders' sums' chunks and migrating layers; never a control call.
// The device a data operation comes from (an activation's or gradient's sender, a migrating
// layer's giver); -1 for a sum's chunk, whose sender is a holder's rank.
int data_source(const wire::device_call& c);
bool is_data(const wire::device_call& c);

// Who may send what when the controller serves CURVE (docs/SECURITY.md): nodes join, beat,
// answer device calls and leave; operators inject faults and retire devices. Nothing: allowed;
// else why not. `role` is the sender key's role (none: not authenticated).
std::optional<std::string> refusal(std::optional<comm::key_role> role, const wire::body& b);

// Error text on the wire is capped (wire::decode_limits::max_text).
std::string clip(const std::string& s);

}  // namespace dynapar::actors::remote
