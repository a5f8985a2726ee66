// Atoms and in-process message types of the actors. Tensors travel as shared handles (no
// copy); these types never leave the process (runtime/wire serialises what does).
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "control/controller.hpp"
#include "comm/link_shaper.hpp"
#include "model/api.hpp"
#include "model/peer_sum.hpp"
#include "planner/plan.hpp"
#include "schedule/schedule.hpp"
#include "step/stage_work.hpp"
#include "training/settings.hpp"
#include "wire/device_call.hpp"
#include "wire/messages.hpp"

namespace dynapar::actors {
struct stage_task;
// A stage's figures at its end or a probe's progress: the wire op itself (one type).
using stage_report = wire::ops::stage_report;
struct group_task;
struct group_report;
struct layer_transfer;
struct device_gradients;
struct reduce_task;
struct reduce_part;
struct sum_held;
struct applied;
}  // namespace dynapar::actors

// Declared before the handles below name them (a specialisation must precede any use).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::model::tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::model::layer_copy)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<dynapar::model::tensor>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<std::vector<dynapar::model::tensor>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::stage_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::stage_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::group_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::group_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::control::measurement)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::planner::plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::layer_transfer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::device_gradients)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::reduce_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::reduce_part)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::sum_held)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::applied)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::comm::link_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::control::decision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::wire::device_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::control::controller_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::training::shard_file)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::wire::ops::shard_saved)

namespace dynapar::actors {

using hold_atom = caf::atom_constant<caf::atom("hold")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using act_atom = caf::atom_constant<caf::atom("act")>;
using grad_atom = caf::atom_constant<caf::atom("grad")>;
using grads_atom = caf::atom_constant<caf::atom("grads")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using hash_atom = caf::atom_constant<caf::atom("hash")>;
using copy_atom = caf::atom_constant<caf::atom("copy")>;
using copy_lean_atom = caf::atom_constant<caf::atom("copy_lean")>;  // without optimizer state (model::drop_optimizer_state)
using save_atom = caf::atom_constant<caf::atom("save")>;  // a checkpoint's shard (model::save_shard)
using migrate_atom = caf::atom_constant<caf::atom("migrate")>;
using expect_atom = caf::atom_constant<caf::atom("expect")>;  // a migration's target: take that layer from that device
using moved_atom = caf::atom_constant<caf::atom("moved")>;
using drop_atom = caf::atom_constant<caf::atom("drop")>;
using speed_atom = caf::atom_constant<caf::atom("speed")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;
using perturb_atom = caf::atom_constant<caf::atom("perturb")>;
using report_atom = caf::atom_constant<caf::atom("report")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;
using fail_atom = caf::atom_constant<caf::atom("fail")>;
using pause_atom = caf::atom_constant<caf::atom("pause")>;  // fault injection: hung for a while
using memory_atom = caf::atom_constant<caf::atom("memory")>;  // a device's emulated memory cap
using timing_atom = caf::atom_constant<caf::atom("timing")>;  // profile-timed emulation (device_timing)
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using remote_atom = caf::atom_constant<caf::atom("remote")>;  // a device call from another process
using reduce_atom = caf::atom_constant<caf::atom("reduce")>;  // the decentralised sum (reduce_task)
using part_atom = caf::atom_constant<caf::atom("rpart")>;     // between holders (reduce_part)
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using gloo_atom = caf::atom_constant<caf::atom("gloo")>;      // a device's Gloo all-reduce finished (self-sent)  // apply the reduced sum of a step

// The narrow handles the messages below carry (typed, CAF 0.17): each names what its holder
// may send, so sending anything else is a compile error rather than a message dropped at run
// time. The device's and the group's full interfaces are in their own headers.

// Where a migrating layer's arrival (its bytes) or refusal (why) is reported.
using migration_sink = caf::typed_actor<caf::reacts_to<moved_atom, int, int, int, std::size_t>,
                                        caf::reacts_to<moved_atom, int, int, int, std::string>>;

// A layer moving between devices: the source sends it (parameters and optimizer state)
// straight to the target over their emulated link; the target reports to `report_to`.
struct layer_transfer {
  int layer = 0;
  int from = 0, to = 0;
  model::layer_copy replica;
  std::size_t bytes = 0;
  migration_sink report_to;
};

// A chunk of a sum in progress, from one holder of `layer` to another.
struct reduce_part {
  std::int64_t tag = 0;
  int layer = 0;
  model::chunk_msg msg;
  int device = -1;  // the sender: taken only if the sum's holders list it at msg.from
};

// What a device sends another device: activations forward, gradients back, a sum's chunks,
// a migrating layer. A device on another node is a stub that sends these on. An activation
// or gradient names its sender (step, micro-batch, sending device): a device takes it only
// from the neighbour its task names (docs/SECURITY.md, "Authority on the data plane").
using device_peer = caf::typed_actor<caf::reacts_to<act_atom, std::int64_t, int, int, model::tensor>,
                                     caf::reacts_to<grad_atom, std::int64_t, int, int, model::tensor>,
                                     caf::reacts_to<part_atom, reduce_part>, caf::reacts_to<hold_atom, layer_transfer>>;

// What a stage did in a step, to its group (or the error that stopped it): stage_report.
using stage_sink = caf::typed_actor<caf::reacts_to<stage_report>>;

// One stage's part of a step attempt: its work (the payload the wire's step op embeds too),
// its neighbours' handles and its tensors.
struct stage_task : step::stage_work {
  schedule::program program;
  std::vector<model::tensor> inputs;     // first stage: one per micro-batch
  std::vector<model::tensor> targets;    // last stage: one per micro-batch
  device_peer prev, next;                // neighbouring stages (null at the ends)
  int prev_id = -1, next_id = -1;
  comm::link_spec to_prev, to_next;      // emulated links (docs/RUNTIME.md)
  stage_sink report_to;
};

// A group's step: its stages' reports, to the driver.
struct group_report {
  int group = 0;
  std::int64_t tag = 0;
  double loss_sum = 0;
  double time_s = 0;                     // from the supervisor's send to its last stage report
  std::vector<stage_report> stages;
  std::string error;
};

// The driver: each stage's report as it arrives (its device's gradients of the step are then
// final, so its sums may start), and the group's once every stage is in.
using group_sink = caf::typed_actor<caf::reacts_to<stage_report>, caf::reacts_to<group_report>>;

// A group's part of a step: the micro-batches of its share. Its work is each stage's, but for
// the layers (each stage its own) and the samples (the first and last stage's only).
struct group_task : step::stage_work {
  std::vector<model::tensor> inputs, targets;
  std::vector<comm::link_spec> links;    // between consecutive stages
  group_sink report_to;
};

// A device's gradients of every layer it holds after a step, as the exact sum's partial sums.
struct device_gradients {
  int device = 0;
  std::int64_t tag = 0;  // the attempt's (stale answers are told apart)
  std::vector<std::pair<int, std::vector<model::grad_part>>> layers;
};

// The decentralised sum of one layer among its holders (model::peer_sum): the driver asks
// every holder at once; the holders exchange chunks with each other (node to node between
// processes); each answers (sum_held) once it holds the sum, and applies it when the driver
// commits the step (commit_atom), so a failure before the commit leaves no holder ahead.
struct reduce_task {
  std::int64_t tag = 0;                  // the attempt's
  int layer = 0;
  std::int64_t micro_batches = 0;        // the exact sum's leaves
  bool exact = true;                     // false: the holders' sums in rank order
  std::vector<int> holders;              // device ids; a holder's rank is its position
  std::vector<device_peer> peers;        // the same devices, resolved where the task arrives
  // exact: false through Gloo (model::gloo_group): the rendezvous (HOST:PORT; empty: the
  // holders' own sum), and the communicators' generation, which the driver moves on after
  // every plan change and failed attempt, so that no holder reuses a broken one.
  std::string store;
  std::int64_t generation = 0;
  // A bucket: every layer these holders add together in one exchange, ascending, `layer`
  // first; empty: `layer` alone. The answers and the commit name the bucket by `layer`.
  std::vector<int> layers;
  // > 0 (clipping by global norm): the answer carries the sum's gradient norms at this
  // divisor (model::grad_norms), which the driver needs before the commit.
  double norms_divisor = 0;
};

// A holder's answer to a reduce_task: it holds the sum of `layer` for the attempt `step`
// (answers of an abandoned attempt are told apart by the tag), and how many bytes of the
// other holders' chunks it received for it (the sum's traffic into this holder).
struct sum_held {
  int device = 0;
  std::int64_t tag = 0;
  int layer = 0;
  std::int64_t bytes_in = 0;
  std::vector<std::vector<float>> norms;  // reduce_task::norms_divisor > 0: each bucket layer's, in order
};

// A holder's confirmation that it applied step `step`'s sum to `layer` (the answer to
// apply_atom and commit_atom): the ledger counts a step only once every holder of every layer
// confirmed it.
struct applied {
  int device = 0;
  std::int64_t tag = 0;  // the attempt's
  int layer = 0;
};

}  // namespace dynapar::actors
