# dynapar control plane: every message between the controller and node processes travels
# in one Envelope over ZeroMQ. Fields are append-only; Envelope.version is bumped on any
# change a peer must understand (runtime/wire/messages.hpp: protocol_version).
@0xa877773d75b4892b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("dynapar::schema");

struct Envelope {
  version @0 :UInt16;
  sender @1 :Text;
  seq @2 :UInt64;
  body :union {
    plan @3 :Plan;
    join @4 :Join;
    leave @5 :Leave;
    heartbeat @6 :Heartbeat;
    report @7 :DeviceReport;
    fault @8 :FaultCommand;
    metrics @9 :Metrics;
    welcome @10 :Welcome;
    call @11 :DeviceCall;
    peers @12 :Peers;
  }
}

enum Schedule {
  gpipe @0;
  oneFOneB @1;
}

# One slot's plan: groups of devices in pipeline order, their layer splits and batch shares.
struct Plan {
  slot @0 :Int64;
  schedule @1 :Schedule;
  numLayers @2 :UInt32;
  batch @3 :UInt32;
  groups @4 :List(Group);
}

struct Group {
  devices @0 :List(Int32);
  splits @1 :List(UInt32);   # n + 1 cut points, 0 .. numLayers
  share @2 :UInt32;
  microBatch @3 :UInt32;
}

struct DeviceSpec {
  id @0 :Int32;
  name @1 :Text;
  speed @2 :Float64;
  memoryBytes @3 :Float64;
  pricePerS @4 :Float64;
  powerW @5 :Float64;
  node @6 :Int32;
  rack @7 :Int32;
  nicBw @8 :Float64;         # bytes/s; 0 = unlimited
}

struct Join {
  node @0 :Text;
  devices @1 :List(DeviceSpec);
  dataEndpoint @2 :Text;      # tcp://HOST:PORT where the node takes activations, gradients and
                              # layers from other nodes (docs/DISTRIBUTED.md, "Data plane")
}

# The controller to every node, whenever membership changes: who the other nodes are, where
# their data sockets are, which key each proves (CURVE; empty without keys) and which devices
# each hosts. A node sends data straight to the node hosting the target device and takes data
# only from nodes in the newest list.
struct Peers {
  generation @0 :UInt64;      # grows with every change; an older list is ignored
  peers @1 :List(Peer);
}

struct Peer {
  node @0 :Text;
  endpoint @1 :Text;
  publicKey @2 :Text;         # Z85, 40 characters; empty without keys
  devices @3 :List(Int32);
}

struct Leave {
  node @0 :Text;
  devices @1 :List(Int32);
  reason @2 :Text;
}

struct Heartbeat {
  node @0 :Text;
  timeNs @1 :Int64;
}

# What a device measured in one step: per stage it holds, compute and transfer times.
struct DeviceReport {
  device @0 :Int32;
  slot @1 :Int64;
  step @2 :Int64;
  stages @3 :List(StageTiming);
}

struct StageTiming {
  firstLayer @0 :UInt32;
  endLayer @1 :UInt32;        # exclusive
  samples @2 :UInt32;
  computeS @3 :Float64;
  transferS @4 :Float64;
  transferBytes @5 :Float64;
}

enum FaultKind {
  kill @0;
  slow @1;
  pause @2;
  leave @3;
  join @4;
  partition @5;
}

struct FaultCommand {
  kind @0 :FaultKind;
  device @1 :Int32;
  factor @2 :Float64;         # slow: speed multiplier in (0, 1]
  durationSteps @3 :UInt32;   # slow, pause: 0 = until told otherwise
  peer @4 :Int32;             # partition: the other end (-1: the device's node is cut off from all)
  durationS @5 :Float64;      # pause, partition: seconds
}

struct Metrics {
  slot @0 :Int64;
  step @1 :Int64;
  batchTimeS @2 :Float64;
  loss @3 :Float64;
  cost @4 :Float64;
  costQueue @5 :Float64;
  samplesPerS @6 :Float64;
}

# The controller's answer to a Join: which devices it accepted (or why none), and what a node
# needs to hold layers: the model (a built-in name or a TorchScript path both sides can read),
# its seed and the optimizer.
struct Welcome {
  accepted @0 :Bool;
  reason @1 :Text;
  devices @2 :List(Int32);
  model @3 :Text;
  seed @4 :UInt64;
  optimizer @5 :Text;
  lr @6 :Float64;
  momentum @7 :Float64;
  weightDecay @8 :Float64;
  rejoin @9 :Bool;            # to a node the controller does not know (it restarted, or it
                              # declared the node lost): join again, with fresh devices
  modelHash @10 :Text;        # a TorchScript model's SHA-256 (hex): the node loads the file only
                              # if its bytes hash to this; empty for a built-in model
}

# Tensor data travels after the envelope, one ZeroMQ frame per tensor, in this list's order.
struct TensorMeta {
  dtype @0 :UInt8;            # 0 float32, 1 float64, 2 int64, 3 int32, 4 uint8
  shape @1 :List(Int64);
}

enum DeviceOp {
  reply @0;          # the answer to call `id`: ints, reals, tensors as the call defines
  error @1;          # call `id` failed: text says why
  hold @2;           # ints [layer] ++ layer layout; tensors: the layer
  migrate @3;        # ints [layer, to]; reals [bandwidth, latency]
  moved @4;          # ints [layer, from, to, bytes]: a migrated layer arrived (bytes -1, text: refused,
                     # the target is out of memory)
  drop @5;           # ints [layer]
  speed @6;          # reals [speed]
  probe @7;          # reply reals [seconds]
  step @8;           # a stage's part of a step (docs/DISTRIBUTED.md); ints[0] is the attempt's tag, ints[7] the group's first micro-batch
  activation @9;     # ints [step, micro]; tensors [activation]
  gradient @10;      # ints [step, micro]; tensors [gradient]
  stageReport @11;   # a stage finished or failed
  gradients @12;     # ints [step tag, layers...]; reply: per layer, its partial sums of the exact sum's tree
  apply @13;         # ints [layer]; reals [divisor]; tensors: summed gradients
  hash @14;          # ints [layer]; reply ints [hash]
  copy @15;          # ints [layer]; reply: the layer
  perturb @16;       # ints [layer]
  retire @17;        # the device leaves the run
  fail @18;          # ints [after_us]: fault injection, the node process kills itself (SIGKILL) then
  pause @19;         # ints [after_us, cut_off]; reals [seconds]: fault injection, the node goes
                     # silent (hung: nothing handled; cut_off: its traffic dropped) for that long
  memory @20;        # reals [bytes]: the device's emulated memory (0: none)
  timing @21;        # reals [fwd_s, bwd_s, fixed_s, update_s] per layer: profile-timed emulation
                     # (docs/RUNTIME.md); empty: CPU-timed
  reduce @22;        # ints [step tag, layer, micro-batches, exact, holders...]: add the layer's
                     # gradients among its holders (docs/RUNTIME.md); reply ints [step tag, layer,
                     # bytes of the other holders' chunks received] once the sum is held
  reducePart @23;    # between holders: ints [step tag, layer, gather, from rank, parts, then
                     # (level, index) per part]; tensors: one per part
  commit @24;        # ints [step tag, layer]; reals [divisor]: apply the held sum
}

# A device operation between processes: the controller calls a device on a node, the node
# answers, and devices send each other activations, gradients and layers.
struct DeviceCall {
  op @0 :DeviceOp;
  id @1 :UInt64;              # request id; 0: no answer wanted
  device @2 :Int32;           # the device it is for (a reply: the one answering)
  ints @3 :List(Int64);
  reals @4 :List(Float64);
  text @5 :Text;
  tensors @6 :List(TensorMeta);
}
