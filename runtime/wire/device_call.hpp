// Device operations between processes as plain structs, one per operation (schemas/control.capnp
// DeviceCall). runtime/wire decodes and checks them; actors/remote turns them into actor
// messages and back. Tensor data is not in here: it follows the envelope as frames.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "control/measurement.hpp"
#include "step/stage_work.hpp"

namespace dynapar::wire {

namespace ops {

struct link {
  double bandwidth = 0;  // bytes/s; 0 = unlimited (the wire takes finite numbers only)
  double latency = 0;    // seconds per transfer
};

struct ack {};                                   // answer: done
struct error { std::string why; };               // answer: failed
struct hold {                                    // a layer placed (from -1) or migrating; answer to copy
  int layer = 0, from = -1, to = 0;
  std::uint64_t bytes = 0;
  std::vector<std::int64_t> layout;              // model::to_wire; tensors: the layer's state
  // Non-zero (placed only): no layout and no tensors; the node builds the layer from the job's
  // model and seed, as it was before any step, and its state must hash to this (state_hashes).
  std::uint64_t built = 0;
  // Answer to copy_lean: the layer's whole state hashed (model::state_hashes) where it is held;
  // the tensors are its parameters and buffers only.
  std::uint64_t state_hash = 0;
  // Non-empty (placed only): no layout and no tensors; the node reads the layer from this
  // checkpoint shard (model::save_shard), whose SHA-256 must be shard_sha256.
  std::string shard{}, shard_sha256{};
};
struct migrate { int layer = 0, to = 0; link path; };
struct expect { int layer = 0, from = 0; };  // to a migration's target: take `layer` from `from` once
struct moved { int layer = 0, from = 0, to = 0; std::uint64_t bytes = 0; std::string refused; };
struct drop { int layer = 0; };
struct speed { double factor = 1; };
struct probe {};
struct probed { double seconds = 0; };           // answer to probe
// Same numbering as schedule::op (actors/remote/frames.cpp checks it).
inline constexpr int stage_op_count = 7;
struct instruction { int kind = 0, micro = -1; };
struct step : ::dynapar::step::stage_work {         // tensors: inputs, then targets
  int prev = -1, next = -1;
  int inputs = 0, targets = 0;
  std::vector<instruction> program;
  link to_prev, to_next;
  // With a flag set, the node builds those tensors from its own copy of the data set and the
  // work's samples (they are then not among the call's tensors).
  bool inputs_from_samples = false, targets_from_samples = false;
};
struct activation { std::int64_t tag = 0; int micro = 0; int from = -1; };  // one tensor; from: the sending device
struct gradient { std::int64_t tag = 0; int micro = 0; int from = -1; };    // one tensor
// A stage's figures (the device actor's message too: actors::stage_report).
struct stage_report : control::stage_figures {
  std::int64_t tag = 0;                          // the attempt's (step::stage_work::tag)
  std::string error;                             // empty when the stage succeeded
  int interim = 0;                               // 1, 2: a probe's progress (StageReport)
};
struct gradients { std::int64_t tag = 0; std::vector<int> layers; };
struct tree_place { int level = 0; std::int64_t index = 0; };
struct layer_parts { int layer = 0, tensors_per_part = 0; std::vector<tree_place> parts; };
struct gradient_set { int device = 0; std::int64_t tag = 0; std::vector<layer_parts> layers; };  // answer to gradients
struct apply { std::int64_t tag = 0; int layer = 0; double divisor = 1; double scale = 1; };  // tensors: the summed gradients
struct hash { int layer = 0; };
struct hashed { std::uint64_t value = 0; };                     // answer to hash
struct copy { int layer = 0; };
struct copy_lean { int layer = 0; };  // a copy for evaluation: answer hold, without optimizer state
struct save_shard { int layer = 0; std::string path; };           // a checkpoint's shard
struct shard_saved { std::string sha256; std::uint64_t bytes = 0; std::string error; };  // answer to save_shard
struct perturb { int layer = 0; };
struct retire {};
struct fail { std::uint64_t after_us = 0; };
struct pause { std::uint64_t after_us = 0; bool cut_off = false; double seconds = 0; };
struct memory { double bytes = 0; };
struct layer_timing { double forward_s = 0, backward_s = 0, fixed_s = 0, update_s = 0; };
struct timing { std::vector<layer_timing> layers; };
struct reduce {
  std::int64_t tag = 0;
  int layer = 0;
  std::int64_t micro_batches = 0;
  bool exact = true;
  std::vector<int> holders;
  std::string store;  // exact: false through Gloo: the rendezvous HOST:PORT (empty: the holders' own sum)
  std::int64_t generation = 0;
  std::vector<int> layers;  // the bucket: ascending, `layer` first (empty: `layer` alone)
  double norms_divisor = 0;  // > 0: answer with the gradient norms at this divisor (clipping)
};
struct sum_held {  // answer to reduce
  std::int64_t tag = 0;
  int layer = 0;
  std::int64_t bytes_in = 0;
  std::vector<std::vector<float>> norms;  // each bucket layer's gradient norms (reduce.norms_divisor > 0)
};
struct reduce_part {
  std::int64_t tag = 0;
  int layer = 0;
  bool gather = false;
  int from = 0;  // the sender's rank
  std::vector<tree_place> parts;
  int device = -1;  // the sender's device (protocol 28)
};
struct commit { std::int64_t tag = 0; int layer = 0; double divisor = 1; double scale = 1; };

}  // namespace ops

// In the schema's order (DeviceCall.op).
using device_op = std::variant<ops::ack, ops::error, ops::hold, ops::migrate, ops::moved, ops::drop, ops::speed, ops::probe,
                               ops::probed, ops::step, ops::activation, ops::gradient, ops::stage_report, ops::gradients,
                               ops::gradient_set, ops::apply, ops::hash, ops::hashed, ops::copy, ops::perturb, ops::retire,
                               ops::fail, ops::pause, ops::memory, ops::timing, ops::reduce, ops::sum_held, ops::reduce_part,
                               ops::commit, ops::copy_lean, ops::save_shard, ops::shard_saved, ops::expect>;

struct tensor_meta {
  std::uint8_t dtype = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides{};  // empty: row-major (model::tensor_meta)
};

struct device_call {
  std::uint64_t id = 0;  // request id; 0: no answer wanted
  int device = 0;        // the device it is for (an answer: the one answering)
  device_op op;
  std::vector<tensor_meta> tensors;
};

}  // namespace dynapar::wire
