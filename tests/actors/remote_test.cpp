// Device calls between processes: tensors, sample ids and layers survive the wire bit for bit
// (through a real ZeroMQ socket), only what is meant as data travels as data, and malformed
// calls are errors. The controller's admission of nodes: remote_admission_test.cpp.
#include <catch2/catch.hpp>

#include "actors/device_actor.hpp"
#include "actors/remote/frames.hpp"
#include "data/dataset.hpp"
#include "data/source.hpp"
#include "wire/codec.hpp"

using namespace dynapar;
namespace remote = dynapar::actors::remote;

namespace {

// Sends a packet through a ZeroMQ PAIR over inproc and returns what arrived.
comm::packet through_zeromq(comm::packet p) {
  zmq::context_t ctx{1};
  zmq::socket_t a(ctx, zmq::socket_type::pair), b(ctx, zmq::socket_type::pair);
  a.bind("inproc://remote-test");
  b.connect("inproc://remote-test");
  REQUIRE(comm::send_packet(a, std::move(p), false));
  auto got = comm::recv_packet(b, false, std::chrono::milliseconds(2000));
  REQUIRE(got);
  REQUIRE(*got);
  return std::move(**got);
}

std::vector<unsigned char> bytes_of(const model::tensor& t) {
  model::tensor_meta meta;
  const auto b = model::to_blob(t, meta);
  const auto* p = static_cast<const unsigned char*>(b.data);
  return {p, p + b.size};
}

// One Adam step of the whole model on a worker holding every layer.
void train_step(model::device_worker& w, int layers, const data::dataset& d, const std::vector<int>& samples) {
  w.begin_step(0);
  const int n = static_cast<int>(samples.size());
  auto out = w.forward(0, 0, layers, model::inputs(d, samples, 0, n));
  REQUIRE(out);
  REQUIRE(w.backward_from_loss(0, model::targets(d, samples, 0, n)));
  for (int l = 0; l < layers; ++l) {
    auto summed = model::tree_sum(w.partial_gradients(l), 1);
    REQUIRE(summed);
    REQUIRE(w.apply(l, *summed, n, 0, 1.0));
  }
}

}  // namespace

TEST_CASE("tensors in device calls cross a ZeroMQ socket bit for bit", "[remote]") {
  model::set_threads(1);
  const auto d = data::synthetic(64, 5);
  std::vector<int> samples(16);
  for (int i = 0; i < 16; ++i) samples[i] = i;
  const auto x = model::inputs(d, samples, 0, 16);   // float32 [16, 1, 28, 28]
  const auto y = model::targets(d, samples, 0, 16);  // int64 [16]
  wire::ops::step st;
  st.tag = 7;
  st.hi = 2;
  st.inputs = 1;
  st.targets = 1;
  auto got = remote::unpack(through_zeromq(remote::pack(remote::call_to(3, st), {x, y}, "test")));
  REQUIRE(got);
  const auto& call = std::get<wire::device_call>(got->env.msg);
  CHECK(call.device == 3);
  CHECK(std::get<wire::ops::step>(call.op).tag == 7);
  REQUIRE(got->tensors.size() == 2);
  CHECK(bytes_of(got->tensors[0]) == bytes_of(x));
  CHECK(bytes_of(got->tensors[1]) == bytes_of(y));
  CHECK(call.tensors[0].shape == std::vector<std::int64_t>{16, 1, 28, 28});
}

TEST_CASE("a step's inputs travel as sample ids to a node holding the data set, and are built bit for bit", "[remote]") {
  model::set_threads(1);
  const auto d = data::synthetic(64, 5);
  const std::vector<int> order = {63, 2, 17, 40, 5, 9, 31};  // a step's samples, as the sampler shuffles them
  actors::stage_task t;  // a one-stage group: inputs and targets; micro-batches of 4 and 3
  t.tag = 3;
  t.lo = 0;
  t.hi = 2;
  for (auto [lo, hi] : {std::pair{0, 4}, std::pair{4, 7}}) {
    t.inputs.push_back(model::inputs(d, order, lo, hi));
    t.targets.push_back(model::targets(d, order, lo, hi));
    t.samples.emplace_back(order.begin() + lo, order.begin() + hi);
  }
  // To a node that has not proved the data set: the tensors, as before.
  std::vector<model::tensor> ts;
  auto plain = remote::step_of(t, ts);
  CHECK((ts.size() == 4 && plain.inputs == 2 && plain.targets == 2 && plain.samples.empty()));
  // To one that has: ids only, through ZeroMQ, and the node's copy gives the same bits.
  auto op = remote::step_of(t, ts, true);
  CHECK((ts.empty() && op.inputs_from_samples && op.targets_from_samples));
  auto got = remote::unpack(through_zeromq(remote::pack(remote::call_to(1, op), ts, "test")));
  REQUIRE(got);
  const auto node_copy = data::synthetic(64, 5);
  auto task = remote::task_from(std::get<wire::ops::step>(std::get<wire::device_call>(got->env.msg).op), got->tensors, &node_copy);
  REQUIRE(task);
  REQUIRE((task->inputs.size() == 2 && task->targets.size() == 2));
  for (int k = 0; k < 2; ++k) {
    CHECK(bytes_of(task->inputs[k]) == bytes_of(t.inputs[k]));
    CHECK(bytes_of(task->targets[k]) == bytes_of(t.targets[k]));
  }
  // A middle stage gets neither, whatever the node holds.
  actors::stage_task mid = t;
  mid.inputs.clear();
  mid.targets.clear();
  mid.samples.clear();
  auto m = remote::step_of(mid, ts, true);
  CHECK((ts.empty() && !m.inputs_from_samples && !m.targets_from_samples && m.inputs == 0));
}

TEST_CASE("an evaluation names samples of the validation set: the node builds them from its copy of that set", "[remote]") {
  model::set_threads(1);
  const auto train = data::synthetic(64, 5), val = data::synthetic(40, 6);
  actors::stage_task t;  // a one-stage group's evaluation: chunks of 4 and 3 validation samples
  t.tag = 9;
  t.lo = 0;
  t.hi = 2;
  t.train_step = -1;
  t.evaluate = true;
  const std::vector<int> ids = {0, 1, 2, 3, 4, 5, 6};
  for (auto [lo, hi] : {std::pair{0, 4}, std::pair{4, 7}}) {
    t.inputs.push_back(model::inputs(val, ids, lo, hi));
    t.targets.push_back(model::targets(val, ids, lo, hi));
    t.samples.emplace_back(ids.begin() + lo, ids.begin() + hi);
  }
  std::vector<model::tensor> ts;
  auto op = remote::step_of(t, ts, true);
  CHECK((ts.empty() && op.evaluate && op.inputs_from_samples));
  auto got = remote::unpack(through_zeromq(remote::pack(remote::call_to(1, op), ts, "test")));
  REQUIRE(got);
  const auto& wire_op = std::get<wire::ops::step>(std::get<wire::device_call>(got->env.msg).op);
  CHECK(wire_op.evaluate);
  // The node passes its validation copy for an evaluation (node_bridge.cpp): the same bits as
  // the controller's; the training set's samples of the same ids differ.
  auto task = remote::task_from(wire_op, got->tensors, &val);
  REQUIRE(task);
  CHECK(task->evaluate);
  for (int k = 0; k < 2; ++k) {
    CHECK(bytes_of(task->inputs[k]) == bytes_of(t.inputs[k]));
    CHECK(bytes_of(task->targets[k]) == bytes_of(t.targets[k]));
  }
  CHECK(bytes_of(model::inputs(train, ids, 0, 4)) != bytes_of(t.inputs[0]));
  // An evaluation that is also a probe is refused on decode.
  op.more = true;
  CHECK_FALSE(remote::unpack(through_zeromq(remote::pack(remote::call_to(1, op), ts, "test"))));
}

TEST_CASE("a layer moves between processes with its Adam state and trains on bit for bit", "[remote]") {
  model::set_threads(1);
  auto m = model::make_model("cnn", 9);
  REQUIRE(m);
  const int L = model::num_layers(**m);
  const auto d = data::synthetic(128, 4);
  std::vector<int> first(32), second(32);
  for (int i = 0; i < 32; ++i) first[i] = i, second[i] = 64 + i;
  model::optimizer_config opt;
  auto a = model::make_worker(opt), b = model::make_worker(opt);
  for (int l = 0; l < L; ++l) a->hold(l, model::copy_layer(**m, l));
  train_step(*a, L, d, first);  // the Adam moments are now non-zero
  for (int l = 0; l < L; ++l) {
    std::vector<model::tensor> ts;
    const auto c = remote::call_to(1, remote::layer_of(l, 0, 1, 0, a->copy(l), ts));
    auto got = remote::unpack(through_zeromq(remote::pack(c, ts)));
    REQUIRE(got);
    auto lm = remote::layer_from(model::layer_source::of(*m), std::get<wire::ops::hold>(std::get<wire::device_call>(got->env.msg).op), got->tensors);
    REQUIRE(lm);
    CHECK(lm->layer == l);
    b->hold(l, lm->replica);
    CHECK(b->hash(l) == a->hash(l));
  }
  // The next step depends on the moments: it agrees only if they moved too.
  train_step(*a, L, d, second);
  train_step(*b, L, d, second);
  for (int l = 0; l < L; ++l) CHECK(b->hash(l) == a->hash(l));
}

TEST_CASE("a fresh layer is built by the node, checked by hash, a trained one travels", "[remote]") {
  model::set_threads(1);
  auto m = model::make_model("cnn", 9);
  REQUIRE(m);
  const int L = model::num_layers(**m);
  // What the hub keeps: each layer's hash before any step, from its own build of the model.
  std::vector<std::uint64_t> fresh;
  for (int l = 0; l < L; ++l) fresh.push_back(model::state_hashes({model::copy_layer(**m, l)}).front());
  // The node's source: from the job's name and seed, building a layer only when asked.
  auto node = model::layer_source::open("cnn", 9);
  REQUIRE(node);
  REQUIRE(node->num_layers() == L);
  model::optimizer_config opt;
  auto trained = model::make_worker(opt);
  for (int l = 0; l < L; ++l) trained->hold(l, model::copy_layer(**m, l));
  train_step(*trained, L, data::synthetic(64, 4), std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  for (int l = 0; l < L; ++l) {
    INFO("layer " << l);
    std::vector<model::tensor> ts;
    const auto h = remote::placed_layer(l, 2, model::copy_layer(**m, l), fresh, ts);
    CHECK((h.built == fresh[static_cast<std::size_t>(l)] && ts.empty() && h.layout.empty() && h.from == -1 && h.to == 2));
    auto lm = remote::layer_from(*node, h, ts);
    REQUIRE(lm);
    CHECK(model::state_hashes({lm->replica}).front() == fresh[static_cast<std::size_t>(l)]);
    // A copy that trained is not the fresh layer: its state travels, and arrives bit for bit.
    const auto moved = remote::placed_layer(l, 2, trained->copy(l), fresh, ts);
    CHECK((moved.built == 0 && !ts.empty()));
    auto back = remote::layer_from(*node, moved, ts);
    REQUIRE(back);
    CHECK(model::state_hashes({back->replica}).front() == model::state_hashes({trained->copy(l)}).front());
  }
  // A node whose model is not the controller's (another seed here; another file or LibTorch
  // in life) refuses to build, naming the layer.
  auto other = model::layer_source::open("cnn", 10);
  REQUIRE(other);
  std::vector<model::tensor> none;
  const auto h = remote::placed_layer(1, 2, model::copy_layer(**m, 1), fresh, none);
  auto refused = remote::layer_from(*other, h, none);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message.find("layer 1 built here") != std::string::npos);
  auto beyond = h;
  beyond.layer = L;
  CHECK_FALSE(remote::layer_from(*node, beyond, none));
}

// The controller relays data between devices but hands answers to the caller's proxy: a
// layer copy's answer is a layer with its sender, as a migrating layer is.
TEST_CASE("only unasked activations, gradients, sum chunks and migrating layers are data", "[remote]") {
  auto migrating = remote::call_to(2, wire::ops::hold{0, 1, 2, 0, {}});
  CHECK(remote::is_data(migrating));
  auto copied = migrating;
  copied.id = 9;
  CHECK_FALSE(remote::is_data(copied));
  CHECK_FALSE(remote::is_data(remote::call_to(2, wire::ops::hold{0, -1, 2, 0, {}})));  // placed by the controller
  CHECK(remote::is_data(remote::call_to(2, wire::ops::activation{})));
  CHECK(remote::is_data(remote::call_to(2, wire::ops::reduce_part{})));
  CHECK_FALSE(remote::is_data(remote::call_to(2, wire::ops::reduce{})));
  CHECK_FALSE(remote::is_data(remote::call_to(2, wire::ops::stage_report{})));
}

// Each operation's own fields are checked on decode (tests/wire/device_call_test.cpp); here,
// what only the receiving process can check: frames against the header, tensors against the
// model, and what a device's tensors say against what the conversion indexes by.
TEST_CASE("malformed device calls are errors naming what is wrong", "[remote]") {
  model::set_threads(1);
  const auto d = data::synthetic(16, 1);
  const std::vector<int> s = {0, 1, 2, 3};
  const auto x = model::inputs(d, s, 0, 4);

  // A step announcing one input and one target but carrying one tensor, through the wire.
  wire::ops::step step;
  step.hi = 2;
  step.inputs = 1;
  step.targets = 1;
  auto t = remote::unpack(remote::pack(remote::call_to(0, step), {x}));
  REQUIRE_FALSE(t);
  CHECK(t.err().message.find("counts") != std::string::npos);
  // The same, built in-process, is refused by the conversion too.
  REQUIRE_FALSE(remote::task_from(step, {x}));
  REQUIRE(remote::task_from(step, {x, x}));

  // A step naming its samples: refused by a node without the data set, or for a sample
  // beyond its copy.
  wire::ops::step by_ids = step;
  by_ids.inputs = 0;
  by_ids.inputs_from_samples = true;
  by_ids.samples = {{0, 1}, {2, 3}};
  CHECK(remote::task_from(by_ids, {x}).err().message.find("holds no copy of the job's data set") != std::string::npos);
  by_ids.samples = {{0, 16}};
  CHECK(remote::task_from(by_ids, {x}, &d).err().message.find("names sample 16, beyond this node's data set of 16") != std::string::npos);

  // Gradients claiming more tensors than came, and fewer.
  const wire::ops::gradient_set g{0, 7, {{0, 2, {{0, 0}, {0, 1}}}}};
  REQUIRE_FALSE(remote::gradients_from(g, {x}));
  REQUIRE_FALSE(remote::gradients_from(g, {x, x, x, x, x}));
  auto ok = remote::gradients_from(wire::ops::gradient_set{0, 7, {{0, 1, {{2, 3}}}}}, {x});
  REQUIRE(ok);
  CHECK(ok->layers.at(0).second.at(0).level == 2);
  CHECK(ok->layers.at(0).second.at(0).index == 3);

  // A packet whose header announces two tensors but which carries one frame.
  auto p = remote::pack(remote::call_to(0, wire::ops::apply{0, 0, 1}), {x, x});
  p.blobs.pop_back();
  auto u = remote::unpack(p);
  REQUIRE_FALSE(u);
  CHECK(u.err().message.find("announces 2 tensors") != std::string::npos);

  // A frame whose size does not match its shape.
  model::tensor_meta meta;
  auto b = model::to_blob(x, meta);
  b.size -= 4;
  REQUIRE_FALSE(model::from_blob(meta, b));

  // A layer whose parameters have the wrong shapes (layer 1's tensors sent as layer 0).
  auto m = model::make_model("cnn", 1);
  REQUIRE(m);
  std::vector<model::tensor> ts;
  auto lc = remote::layer_of(1, -1, 0, 0, model::copy_layer(**m, 1), ts);
  lc.layer = 0;
  REQUIRE_FALSE(remote::layer_from(model::layer_source::of(*m), lc, ts));
  REQUIRE_FALSE(remote::layer_from(*model::layer_source::open("cnn", 1), lc, ts));  // a node's, one layer at a time

  // Garbage where a header should be.
  comm::packet junk;
  junk.header = {1, 2, 3};
  REQUIRE_FALSE(remote::unpack(junk));
}
