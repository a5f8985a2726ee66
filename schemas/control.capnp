# dynapar control plane: every message between the controller and node processes travels
# in one Envelope over ZeroMQ. Envelope.version is bumped on any change a peer must
# understand (runtime/wire/messages.hpp: protocol_version); a peer of another version is
# refused before any body is read, so a bump may change a struct's layout (9 did: every
# device operation became a struct of its own; 20 dropped the Plan, DeviceReport and Metrics
# bodies, which nothing sent, and renumbered the union).
@0xa877773d75b4892b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("dynapar::schema");

struct Envelope {
  version @0 :UInt16;
  sender @1 :Text;
  seq @2 :UInt64;
  body :union {
    join @3 :Join;
    leave @4 :Leave;
    heartbeat @5 :Heartbeat;
    fault @6 :FaultCommand;
    welcome @7 :Welcome;
    call @8 :DeviceCall;
    peers @9 :Peers;
  }
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
  devices @1 :List(DeviceSpec);  # by the job's id; id -1: any free device, described by the node
                                 # (memoryBytes), numbered in the Welcome
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
  dataHash @2 :UInt64;        # a node's: the fingerprint of the data sets it loaded for the job (training and validation)
                              # (runtime/data/source.hpp), 0 for none
  peakRssMb @3 :Float64;      # a node's: its peak resident memory so far, MB (0: not said)
  loading @4 :Bool;           # a node's: still loading the job's data set; its devices join once it is done
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
  data @11 :Text;             # the job's data source, key=value lines (data::encode); empty: none
  dataSamples @12 :UInt32;    # synthetic: the training set's size (seed: the job's)
  dataHash @13 :UInt64;       # the controller's fingerprint of the training and validation sets
  nesterov @14 :Bool;         # sgd: Nesterov momentum
  schedule @15 :Text;         # the learning rate's schedule (common/lr_schedule.hpp): constant,
  warmupSteps @16 :Int64;     #   step or cosine, with its parameters; a node applies step t's
  scheduleSteps @17 :Int64;   #   rate as the reference does
  stepSize @18 :Int64;
  gamma @19 :Float64;
  minLr @20 :Float64;
  labelSmoothing @21 :Float64;  # the loss's (cross-entropy) label smoothing
  bf16 @22 :Bool;             # mixed precision: each forward under autocast to bfloat16
}

# Tensor data travels after the envelope, one ZeroMQ frame per tensor, in this list's order.
struct TensorMeta {
  dtype @0 :UInt8;            # 0 float32, 1 float64, 2 int64, 3 int32, 4 uint8, 5 bfloat16
  shape @1 :List(Int64);
  strides @2 :List(Int64);    # empty: row-major; else a view over its span of storage (protocol 27)
}

# What a stage does, in a step's program (runtime/schedule/schedule.hpp schedule::op).
enum StageOp {
  load @0;
  forward @1;
  backward @2;
  sendAct @3;
  recvAct @4;
  sendGrad @5;
  recvGrad @6;
  reduceGrads @7;             # retired in protocol 21 (no-ops): refused
  optimizerStep @8;           # retired in protocol 21: refused
}

struct Instruction {
  kind @0 :StageOp;
  micro @1 :Int32;            # >= 0
}

# An emulated link (docs/RUNTIME.md).
struct Link {
  bandwidth @0 :Float64;      # bytes/s; 0 = unlimited
  latency @1 :Float64;        # seconds per transfer
}

# A layer with its optimizer state; tensors: its parameters and states in `layout`'s order
# (model::to_wire says which state each parameter has).
struct LayerCopy {
  layer @0 :UInt32;
  from @1 :Int32;             # the device sending it; -1: placed by the controller
  to @2 :Int32;
  bytes @3 :UInt64;           # what the move costs on the emulated link
  layout @4 :List(Int64);
  built @5 :UInt64;           # non-zero: no layout or tensors; the node builds the fresh layer, hashing to this
  stateHash @6 :UInt64;       # (24) answer to copyLean: the whole state's hash; the tensors are parameters and buffers only
  shard @7 :Text;             # (26) placed from this checkpoint shard (no layout, no tensors): the node reads it;
                              #   (27) a name in the node's --shard-dir (step-N/layer-L.pt), not a path
  shardSha256 @8 :Text;       # (26) the shard file's SHA-256, checked before it is read
}

# A checkpoint's shard: the device writes its layer, with its optimizer state, to `path`:
# (27) a shard's name (a step directory and a file), which the node finds in its own
# --shard-dir; it refuses any other.
struct SaveShard {
  layer @0 :UInt32;
  path @1 :Text;
}

# Answer to saveShard: the file's SHA-256 and size, or why it was not written.
struct ShardSaved {
  sha256 @0 :Text;
  bytes @1 :UInt64;
  error @2 :Text;
}

struct Migrate {
  layer @0 :UInt32;
  to @1 :Int32;
  link @2 :Link;
}

# (28) To a migration's target, before its giver is told to send: the device takes `layer` from
# device `from` once (a layer from any other device, or not announced, is refused).
struct Expect {
  layer @0 :UInt32;
  from @1 :Int32;
}

# A migrated layer arrived at `to`, or `to` refused it (out of memory: `refused` says so).
struct Moved {
  layer @0 :UInt32;
  from @1 :Int32;
  to @2 :Int32;
  bytes @3 :UInt64;
  refused @4 :Text;
}

# A stage's part of a step (docs/DISTRIBUTED.md); tensors: the inputs, then the targets.
struct StageTask {
  tag @0 :Int64;              # the attempt's tag: answers of an abandoned attempt are told apart
  firstLayer @1 :UInt32;
  endLayer @2 :UInt32;        # exclusive
  prev @3 :Int32;             # the neighbouring stages' devices; -1 at the ends
  next @4 :Int32;
  inputs @5 :UInt32;
  targets @6 :UInt32;
  firstMicro @7 :UInt64;      # the step's index of the group's first micro-batch
  accumulate @8 :Bool;        # exact: false
  program @9 :List(Instruction);
  toPrev @10 :Link;
  toNext @11 :Link;
  # Each micro-batch's sample ids in the job's training set. With inputsFromSamples (first
  # stage) or targetsFromSamples (last stage) the node builds those from its own copy of the
  # data set (it proved the copy by its heartbeat's dataHash), and no tensor carries them.
  samples @12 :List(List(Int32));
  inputsFromSamples @13 :Bool;
  targetsFromSamples @14 :Bool;
  trainStep @15 :Int64;       # the training step: seeds a layer's dropout with the micro-batch
  # Within-step dispatch (one-stage groups): `more`, a probe, after which the step stays open
  # and the device reports its progress (StageReport.interim); `resume`, the rest of the
  # pool for a step left open by its probe.
  more @16 :Bool;
  resume @17 :Bool;
  # Forward only, in evaluation mode, changing no training state; the samples are of the job's
  # validation set, and the last stage's StageReport.lossSum is the metric's sum over them.
  evaluate @18 :Bool;
  # The samples this stage's place in the batch holds at the next step (first stage, with
  # inputsFromSamples): the node decodes them meanwhile. A hint: a node that does not know the
  # field ignores it, and a wrong guess changes no value.
  aheadSamples @19 :List(Int32);
}

# A micro-batch's activation or gradient between stages; one tensor.
struct MicroTensor {
  tag @0 :Int64;              # the attempt's tag (StageTask.tag)
  micro @1 :UInt32;
  from @2 :Int32;             # the sending device (protocol 27): the receiver takes it only from
}                             #   the stage its task names, hosted by the node that sent it

struct LinkUse {
  from @0 :Int32;
  to @1 :Int32;
  transfers @2 :UInt32;
  bytes @3 :Float64;
  busyS @4 :Float64;
}

# A stage finished (error empty) or failed.
struct StageReport {
  device @0 :Int32;
  tag @1 :Int64;              # the attempt's tag (StageTask.tag)
  messages @2 :UInt32;        # activations and gradients sent
  computeS @3 :Float64;
  waitS @4 :Float64;
  lossSum @5 :Float64;
  links @6 :List(LinkUse);
  error @7 :Text;
  interim @8 :UInt8;          # a probe's progress: 1 its first forward ended, 2 it ended; 0 the stage's end
  idleS @9 :Float64;          # from its update of the step before until this step's task (0: none then)
}

struct GradientsCall {
  tag @0 :Int64;
  layers @1 :List(UInt32);
}

# A partial sum's place in the exact sum's tree: micro-batches [index 2^level, (index+1) 2^level).
struct TreePlace {
  level @0 :UInt8;
  index @1 :UInt64;
}

struct LayerParts {
  layer @0 :UInt32;
  tensorsPerPart @1 :UInt32;
  parts @2 :List(TreePlace);
}

# The answer to `gradients`: per layer its partial sums; tensors in the same order.
struct GradientSet {
  device @0 :Int32;
  tag @1 :Int64;
  layers @2 :List(LayerParts);
}

# tensors: the layer's summed gradients.
struct Apply {
  layer @0 :UInt32;
  divisor @1 :Float64;
  tag @2 :Int64;
  scale @3 :Float64 = 1;      # (19) clipping's factor on the gradient, in (0, 1]
}

struct Pause {
  afterUs @0 :UInt64;
  cutOff @1 :Bool;            # false: hung (nothing handled); true: its traffic dropped
  seconds @2 :Float64;
}

struct LayerTiming {
  forwardS @0 :Float64;
  backwardS @1 :Float64;
  fixedS @2 :Float64;
  updateS @3 :Float64;
}

# Add a layer's gradients among its holders (docs/RUNTIME.md).
struct Reduce {
  tag @0 :Int64;
  layer @1 :UInt32;
  microBatches @2 :UInt64;
  exact @3 :Bool;
  holders @4 :List(Int32);    # a holder's rank is its place here
  store @5 :Text;             # exact: false through Gloo: the c10d TCPStore HOST:PORT the
                              # holders meet at; empty: the holders' own sum
  generation @6 :UInt64;      # the communicators' generation (a new one after every plan
                              # change and failed attempt)
  layers @7 :List(Int32);     # (12) the bucket: every layer added in this one exchange,
                              # ascending, `layer` first; empty: `layer` alone
  normsDivisor @8 :Float64;   # (19) > 0: answer with the sum's gradient norms at this divisor
}

# A holder holds the sum, and received `bytesIn` of the other holders' chunks for it.
struct SumHeld {
  tag @0 :Int64;
  layer @1 :UInt32;
  bytesIn @2 :UInt64;
  norms @3 :List(List(Float32));  # (19) each bucket layer's gradient norms, when asked
}

# Between holders: a chunk's partial sums (scatter) or the summed chunk (gather); a tensor
# per part.
struct ReducePart {
  tag @0 :Int64;
  layer @1 :UInt32;
  gather @2 :Bool;
  from @3 :UInt32;            # the sender's rank
  parts @4 :List(TreePlace);
  device @5 :Int32;           # (28) the sender's device: the receiver takes the chunk only if the
}                             #   sum's holders list it at rank `from`, from the node hosting it


struct Commit {
  tag @0 :Int64;
  layer @1 :UInt32;
  divisor @2 :Float64;
  scale @3 :Float64 = 1;      # (19) clipping's factor on the gradient, in (0, 1]
}

# A device operation between processes: the controller calls a device on a node, the node
# answers (the answer takes the call's id), and devices send each other activations,
# gradients, sum chunks and layers. Each operation is its own struct.
struct DeviceCall {
  id @0 :UInt64;              # request id; 0: no answer wanted
  device @1 :Int32;           # the device it is for (an answer: the one answering)
  tensors @2 :List(TensorMeta);
  op :union {
    ack @3 :Void;             # answer: hold, migrate, drop, apply or commit done
    error @4 :Text;           # answer: the call failed, and why
    hold @5 :LayerCopy;       # answer to copy, too
    migrate @6 :Migrate;
    moved @7 :Moved;
    drop @8 :UInt32;          # a layer
    speed @9 :Float64;        # emulated speed factor
    probe @10 :Void;
    probed @11 :Float64;      # answer: seconds
    step @12 :StageTask;
    activation @13 :MicroTensor;
    gradient @14 :MicroTensor;
    stageReport @15 :StageReport;
    gradients @16 :GradientsCall;
    gradientSet @17 :GradientSet;
    apply @18 :Apply;
    hash @19 :UInt32;         # a layer
    hashed @20 :UInt64;       # answer
    copy @21 :UInt32;         # a layer; answer: hold
    perturb @22 :UInt32;      # a layer
    retire @23 :Void;         # the device leaves the run
    fail @24 :UInt64;         # fault injection: the node kills itself (SIGKILL) after these us
    pause @25 :Pause;         # fault injection: the node goes silent
    memory @26 :Float64;      # the device's emulated memory in bytes (0: none)
    timing @27 :List(LayerTiming);  # profile-timed emulation; empty: CPU-timed
    reduce @28 :Reduce;
    sumHeld @29 :SumHeld;     # answer to reduce
    reducePart @30 :ReducePart;
    commit @31 :Commit;       # apply the held sum
    copyLean @32 :UInt32;     # (24) a layer without its optimizer state; answer: hold with stateHash
    saveShard @33 :SaveShard; # (26) a checkpoint's shard; answer: shardSaved
    shardSaved @34 :ShardSaved;
    expect @35 :Expect;       # (28) a migration's target: take this layer from that device; answer: ack
  }
}
