// Control-plane messages as plain structs (what actors and tools use); runtime/wire turns
// them into Cap'n Proto bytes and back. No generated headers here.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/lr_schedule.hpp"
#include "planner/cluster.hpp"
#include "planner/plan.hpp"
#include "wire/device_call.hpp"

namespace dynapar::wire {

// 2: welcome and device calls (processes, docs/DISTRIBUTED.md).
// 7: nodes send data to each other directly (Join.dataEndpoint, Peers); holders add their
// gradients among themselves (reduce, reducePart, commit).
// 9: every device operation is a struct of its own (wire/device_call.hpp), checked on decode.
// 10: a plan's schedule may be deepOneFOneB.
// 11: nodes load the job's data set (Welcome.data, Heartbeat.dataHash); a step names its
// samples (StageTask.samples) instead of carrying inputs and targets.
// 12: a reduce adds a bucket of layers (Reduce.layers) in one exchange.
// 14: a drop is answered (ack) once the layer is gone: a re-plan waits for it before layers move in.
// 20: the Plan, DeviceReport and Metrics bodies, which nothing sent, are gone (plans travel as
// device calls; measurements as stage reports).
// 24: copyLean, a layer without its optimizer state (with its whole state's hash: Hold.stateHash).
// 25: evaluation steps (StageTask.evaluate), over the validation set, which a node holding the
// job's data loads too (Heartbeat.dataHash covers both splits).
// 26: checkpoints in shards, each written by a holder (saveShard) and read by the device it
// is placed on (Hold.shard).
// 27: a tensor's strides travel (TensorMeta.strides); activations and gradients name their sender.
// 28: a migration's target is told what to expect (expect), and a sum's chunk names its sending
// device (ReducePart.device): a node takes a layer or a chunk only from the device named.
// 29: Heartbeat.loading: a node still loading the job's data set says so, and its devices
// join the run only once it has loaded (or failed to load) it.
inline constexpr std::uint16_t protocol_version = 29;

struct join_msg {
  std::string node;
  // Devices of the job's by id; or id -1, any free one, described by the node (its memory:
  // `dynapar node --devices auto`), which the controller numbers in its welcome.
  std::vector<planner::device_spec> devices;
  std::string data_endpoint;  // tcp://HOST:PORT of the node's data socket
};

struct peer_entry {
  std::string node;
  std::string endpoint;    // its data socket
  std::string public_key;  // Z85 (CURVE); empty without keys
  std::vector<int> devices;
};

// Membership as the data plane sees it (schemas/control.capnp Peers).
struct peers_msg {
  std::uint64_t generation = 0;
  std::vector<peer_entry> peers;
};

struct leave_msg {
  std::string node;
  std::vector<int> devices;
  std::string reason;
};

struct heartbeat_msg {
  std::string node;
  std::int64_t time_ns = 0;
  std::uint64_t data_hash = 0;  // a node's: the data set it loaded (data::fingerprint), 0 for none
  double peak_rss_mb = 0;       // a node's: its peak resident memory so far (0: not said)
  bool loading = false;         // a node's: still loading the job's data set (its devices not yet ready)
};

enum class fault_kind { kill, slow, pause, leave, join, partition };

struct fault_command {
  fault_kind kind = fault_kind::kill;
  int device = 0;
  double factor = 1;
  int duration_steps = 0;
  int peer = -1;
  double duration_s = 0;  // pause, partition
};

struct welcome_msg {
  bool accepted = false;
  std::string reason;
  std::vector<int> devices;
  std::string model;
  std::uint64_t seed = 0;
  std::string optimizer;
  double lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  lr_schedule schedule;
  double label_smoothing = 0;
  bool bf16 = false;  // mixed precision (model::optimizer_config::bf16)
  bool rejoin = false;
  std::string model_hash;  // a TorchScript file's SHA-256 in hex; empty for built-in models
  // The job's training set, for the node to load itself (data::source; seed: `seed`), and the
  // controller's fingerprint of it. Empty / 0: the node loads none.
  std::string data;
  int data_samples = 0;
  std::uint64_t data_hash = 0;
};

using body = std::variant<join_msg, leave_msg, heartbeat_msg, fault_command, welcome_msg, device_call, peers_msg>;

struct envelope {
  std::uint16_t version = protocol_version;
  std::string sender;
  std::uint64_t seq = 0;
  body msg;
};

}  // namespace dynapar::wire
