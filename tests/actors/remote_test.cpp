// Device calls between processes: tensors and layers survive the wire bit for bit (through a
// real ZeroMQ socket), malformed calls are errors, and the controller's ROUTER refuses what
// it must (unknown devices, another protocol version, addresses beyond loopback).
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/remote/node.hpp"
#include "actors/remote/hub.hpp"
#include "actors/remote/frames.hpp"
#include "data/dataset.hpp"
#include "data/source.hpp"
#include "support/loopback.hpp"
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
  w.begin_step();
  const int n = static_cast<int>(samples.size());
  auto out = w.forward(0, 0, layers, model::inputs(d, samples, 0, n));
  REQUIRE(out);
  REQUIRE(w.backward_from_loss(0, model::targets(d, samples, 0, n)));
  for (int l = 0; l < layers; ++l) {
    auto summed = model::tree_sum(w.partial_gradients(l), 1);
    REQUIRE(summed);
    REQUIRE(w.apply(l, *summed, n));
  }
}

// A node of the controller at `ep` hosting device `id`, waiting `timeout_s` for its welcome.
actors::node_config node_of(const std::string& ep, int id, double timeout_s) {
  actors::node_config n;
  n.controller = ep;
  n.connect_timeout_s = timeout_s;
  planner::device_spec dev;
  dev.id = id;
  n.devices = {dev};
  return n;
}

// A controller's settings for the built-in mlp over these devices.
actors::remote_config mlp_job(std::set<int> devices) {
  actors::remote_config rc;
  rc.model = "mlp";
  rc.devices = std::move(devices);
  return rc;
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
  t.step = 3;
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
    auto lm = remote::layer_from(**m, std::get<wire::ops::hold>(std::get<wire::device_call>(got->env.msg).op), got->tensors);
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
  REQUIRE_FALSE(remote::layer_from(**m, lc, ts));

  // Garbage where a header should be.
  comm::packet junk;
  junk.header = {1, 2, 3};
  REQUIRE_FALSE(remote::unpack(junk));
}

TEST_CASE("the controller refuses unknown devices, another protocol version and public addresses", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(1));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto rc = mlp_job({0, 1});

  rc.bind = "tcp://0.0.0.0:0";
  auto open = actors::remote_devices::start(sys, *m, rc);
  REQUIRE_FALSE(open);
  CHECK(open.err().message.find("--allow-remote") != std::string::npos);

  rc.bind = "tcp://127.0.0.1:0";
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();

  auto n = node_of(ep, 7, 5);
  std::atomic<bool> leave{false};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "refused");
  CHECK(r.err().message.find("device 7 is not in the job") != std::string::npos);

  auto l = actors::request_leave({ep, 5, false, std::nullopt}, {5});
  REQUIRE_FALSE(l);
  CHECK(l.err().message.find("device 5 is not in the run") != std::string::npos);
  CHECK((*hub)->present_ids().empty());

  // A peer speaking protocol version 1 hears why it is refused.
  zmq::context_t ctx{1};
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(ep);
  wire::envelope old;
  old.version = 1;
  old.sender = "old-node";
  old.msg = wire::join_msg{"old-node", n.devices, ""};
  comm::packet p;
  p.header = wire::encode(old);
  REQUIRE(comm::send_packet(s, std::move(p), false));
  auto got = comm::recv_packet(s, false, std::chrono::milliseconds(5000));
  REQUIRE(got);
  REQUIRE(*got);
  auto env = wire::decode((*got)->header.data(), (*got)->header.size());
  REQUIRE(env);
  const auto& w = std::get<wire::welcome_msg>(env->msg);
  CHECK_FALSE(w.accepted);
  CHECK(w.reason.find("protocol version 1") != std::string::npos);
  (*hub)->stop();
}

// The controller's side of inputs as sample ids: the Welcome names the data set and its
// fingerprint, and a node gets a step's sample ids only once its heartbeat proves that
// fingerprint; before, or with another, it gets the tensors (counted as inputs).
TEST_CASE("a node gets sample ids only once its heartbeat proves the controller's data set", "[remote]") {
  model::set_threads(1);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto d = data::synthetic(64, 4);
  auto rc = mlp_job({0});
  rc.data = {"synthetic", 64, 4};
  rc.data_hash = data::fingerprint(d);
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);

  zmq::context_t ctx{1};
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::routing_id, std::string("raw-node"));
  s.connect((*hub)->endpoint());
  auto send = [&](wire::body b) {
    wire::envelope e;
    e.sender = "raw-node";
    e.msg = std::move(b);
    comm::packet p;
    p.header = wire::encode(e);
    REQUIRE(comm::send_packet(s, std::move(p), false));
  };
  // The next message of type T from the controller, skipping heartbeats and peer lists.
  auto next = [&](auto want) {
    using T = decltype(want);
    for (int i = 0; i < 50; ++i) {
      auto got = comm::recv_packet(s, false, std::chrono::milliseconds(5000));
      REQUIRE(got);
      REQUIRE(*got);
      auto u = remote::unpack(**got);
      REQUIRE(u);
      if (auto* x = std::get_if<T>(&u->env.msg)) return std::make_pair(*x, u->tensors);
    }
    FAIL("no such message");
    return std::make_pair(T{}, std::vector<model::tensor>{});
  };
  planner::device_spec dev;
  dev.id = 0;
  send(wire::join_msg{"raw-node", {dev}, ""});
  const auto w = next(wire::welcome_msg{}).first;
  REQUIRE(w.accepted);
  CHECK((w.data == "synthetic" && w.data_samples == 64 && w.data_hash == rc.data_hash));

  const std::vector<int> order = {5, 9, 2};
  actors::stage_task t;
  t.hi = 1;
  t.inputs = {model::inputs(d, order, 0, 3)};
  t.targets = {model::targets(d, order, 0, 3)};
  t.samples = {order};
  caf::scoped_actor self{sys};
  t.report_to = caf::actor_cast<actors::stage_sink>(self);
  // A heartbeat, then a request answered on the same connection: once the answer is here,
  // the controller has seen the heartbeat.
  auto beat = [&](std::uint64_t hash) {
    send(wire::heartbeat_msg{"raw-node", 0, hash});
    send(wire::leave_msg{"raw-node", {99}, "sync"});
    CHECK(next(wire::welcome_msg{}).first.reason.find("device 99 is not in the run") != std::string::npos);
  };
  const auto proxy = (*hub)->proxy(0);
  for (const std::uint64_t hash : {rc.data_hash + 1, rc.data_hash}) {
    beat(hash);
    caf::anon_send(proxy, actors::step_atom::value, t);
    auto [call, tensors] = next(wire::device_call{});
    const auto& st = std::get<wire::ops::step>(call.op);
    const bool proved = hash == rc.data_hash;
    CHECK(st.inputs_from_samples == proved);
    CHECK(st.targets_from_samples == proved);
    CHECK(tensors.size() == (proved ? 0u : 2u));
    CHECK(st.samples == (proved ? std::vector<std::vector<int>>{order} : std::vector<std::vector<int>>{}));
  }
  // Only the first step's tensors passed through the controller.
  CHECK((*hub)->tensor_bytes().at("inputs") == static_cast<double>(model::bytes(t.inputs[0]) + model::bytes(t.targets[0])));
  (*hub)->stop();
}

TEST_CASE("a node gives up on a controller that does not answer", "[remote]") {
  auto n = node_of("tcp://127.0.0.1:9", 0, 0.5);  // discard: nothing answers there
  std::atomic<bool> leave{false};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "unreachable");
  CHECK(r.err().message.find("tcp://127.0.0.1:9") != std::string::npos);
}

TEST_CASE("a controller serving CURVE admits listed keys only, and only operators inject", "[remote][curve]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(1));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto make = [](const char* name, comm::key_role role) {
    auto k = comm::make_key_pair(name, role);
    REQUIRE(k);
    return *k;
  };
  const auto ctl = make("controller", comm::key_role::controller);
  const auto node = make("node-a", comm::key_role::node), stranger = make("node-b", comm::key_role::node);
  const auto op = make("alice", comm::key_role::operator_);
  auto rc = mlp_job({0, 1});

  rc.bind = "tcp://0.0.0.0:0";
  rc.allow_remote = true;
  auto open = actors::remote_devices::start(sys, *m, rc);
  REQUIRE_FALSE(open);
  CHECK(open.err().message.find("dynapar keygen") != std::string::npos);

  rc.bind = "tcp://127.0.0.1:0";
  rc.allow_remote = false;
  rc.keys = comm::server_keys{ctl, {node.pub, op.pub}};
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();

  auto n = node_of(ep, 0, 10);
  std::atomic<bool> leave{false};
  n.keys = comm::client_keys{stranger, ctl.pub.key};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "auth");
  CHECK(r.err().message.find("refused this key") != std::string::npos);

  n.keys = comm::client_keys{node, make("controller", comm::key_role::controller).pub.key};  // pins another controller
  r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "auth");
  CHECK((*hub)->present_ids().empty());

  // A node's key may not inject; nothing reaches the driver.
  wire::fault_command kill;
  kill.kind = wire::fault_kind::kill;
  kill.device = 1;
  auto as_node = actors::request_fault({ep, 5, false, comm::client_keys{node, ctl.pub.key}}, kill);
  REQUIRE_FALSE(as_node);
  CHECK(as_node.err().message.find("needs an operator key") != std::string::npos);
  auto plain = actors::request_fault({ep, 5, false, std::nullopt}, kill);
  REQUIRE_FALSE(plain);
  CHECK(plain.err().code == "auth");
  CHECK((*hub)->injected().empty());
  // An operator's key gets through to the controller's own checks.
  auto as_operator = actors::request_fault({ep, 5, false, comm::client_keys{op, ctl.pub.key}}, kill);
  REQUIRE_FALSE(as_operator);
  CHECK(as_operator.err().message.find("device 1 is not in the run") != std::string::npos);
  auto l = actors::request_leave({ep, 5, false, comm::client_keys{op, ctl.pub.key}}, {5});
  REQUIRE_FALSE(l);
  CHECK(l.err().message.find("device 5 is not in the run") != std::string::npos);
  (*hub)->stop();
}

TEST_CASE("a node loads a TorchScript model only if its bytes hash to the controller's", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(1));
  caf::actor_system sys{cfg};
  const std::string original = std::string(DYNAPAR_SOURCE_DIR) + "/examples/models/tiny_cnn.pt";
  auto m = model::make_model(original, 1);
  REQUIRE(m);
  actors::remote_config rc;
  rc.model = original;
  rc.devices = {0};
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);

  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("dynapar_model_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(original, dir / "tiny_cnn.pt");
  std::ofstream(dir / "tiny_cnn.pt", std::ios::app | std::ios::binary) << '\0';  // one byte more: another file

  auto n = node_of((*hub)->endpoint(), 0, 10);
  n.model_dir = dir.string();
  std::atomic<bool> leave{false};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "refused_model");
  CHECK(r.err().message.find("tiny_cnn.pt hashes to") != std::string::npos);

  // The same bytes as the controller's, from the node's own directory: loaded, and the node
  // serves until the controller retires its device.
  fs::copy_file(original, dir / "tiny_cnn.pt", fs::copy_options::overwrite_existing);
  (*hub)->stop();
  hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  n.controller = (*hub)->endpoint();
  std::thread node([&] { r = actors::run_node(n, leave); });
  for (int i = 0; i < 500 && !(*hub)->hosted(0); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK((*hub)->hosted(0));
  (*hub)->stop();
  node.join();
  CHECK(r);
  fs::remove_all(dir);
}

// The proxy speaks the device actor's whole interface (actors/device_actor.hpp): a device of
// this process can migrate a layer to a device on a node through it, and the mover hears the
// arrival as it would from a device here.
TEST_CASE("a layer migrates from a device here to a device on a node through its proxy, bit for bit", "[remote]") {
  model::set_threads(1);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto rc = mlp_job({0, 1});
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  auto n = node_of((*hub)->endpoint(), 1, 10);
  std::atomic<bool> leave{false};
  bool served = false;
  std::thread node([&] { served = static_cast<bool>(actors::run_node(n, leave)); });
  for (int i = 0; i < 500 && !(*hub)->hosted(1); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE((*hub)->hosted(1));

  const auto there = (*hub)->proxy(1);
  actors::device_config dc;
  dc.id = 0;
  const auto here = actors::spawn_device(sys, dc);
  caf::scoped_actor self{sys};
  const auto wait = std::chrono::seconds(10);
  auto fail = [](caf::error& e) { FAIL(to_string(e)); };
  const int layer = 1;
  self->request(here, wait, actors::hold_atom::value, layer, model::copy_layer(**m, layer)).receive([](bool) {}, fail);
  self->request(here, wait, actors::migrate_atom::value, layer, 1, actors::device_peer{there}, comm::link_spec{},
                caf::actor_cast<actors::migration_sink>(self))
      .receive([](bool) {}, fail);
  std::size_t arrived = 0;
  self->receive(
      [&](actors::moved_atom, int l, int from, int to, std::size_t bytes) {
        CHECK(l == layer);
        CHECK(from == 0);
        CHECK(to == 1);
        arrived = bytes;
      },
      [&](actors::moved_atom, int, int, int, const std::string& why) { FAIL(why); },
      caf::after(wait) >> [] { FAIL("no arrival"); });
  CHECK(arrived > 0);
  std::uint64_t h_here = 0, h_there = 1;
  self->request(here, wait, actors::hash_atom::value, layer).receive([&](std::uint64_t v) { h_here = v; }, fail);
  self->request(there, wait, actors::hash_atom::value, layer).receive([&](std::uint64_t v) { h_there = v; }, fail);
  CHECK(h_here == h_there);
  self->send_exit(here, caf::exit_reason::user_shutdown);
  (*hub)->stop();
  node.join();
  CHECK(served);
}

TEST_CASE("a slow, flooding or oversized peer does not stall the controller", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(1));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto rc = mlp_job({0});
  rc.max_frame_bytes = 1 << 20;
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  // The controller still answers, within a second.
  auto answers = [&] {
    auto l = actors::request_leave({ep, 1.0, false, std::nullopt}, {5});
    return !l && l.err().message.find("device 5 is not in the run") != std::string::npos;
  };

  // A byte at a time: a ZMTP greeting that trickles in over the whole test.
  const int slow = connect_loopback(port);
  REQUIRE(slow >= 0);
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    const unsigned char greeting[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    for (std::size_t i = 0; i < sizeof greeting && !done; ++i) {
      (void)!::write(slow, greeting + i, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  CHECK(answers());

  // An oversized frame: the sender is cut off before the controller reads it.
  zmq::context_t ctx{1};
  zmq::socket_t big(ctx, zmq::socket_type::dealer);
  big.set(zmq::sockopt::linger, 0);
  big.connect(ep);
  wire::envelope e;
  e.sender = "big";
  e.msg = wire::join_msg{"big", {}, ""};
  comm::packet p;
  p.header = wire::encode(e);
  p.header.resize(4 << 20, 0);
  REQUIRE(comm::send_packet(big, std::move(p), false));
  auto none = comm::recv_packet(big, false, std::chrono::milliseconds(1000));
  REQUIRE(none);
  CHECK_FALSE(*none);  // no answer: never delivered
  CHECK(answers());

  // A flood of joins from 100 identities for the one device: one node gets it, every other
  // is refused, and the controller keeps answering.
  std::vector<zmq::socket_t> flood;
  for (int i = 0; i < 100; ++i) {
    flood.emplace_back(ctx, zmq::socket_type::dealer);
    flood.back().set(zmq::sockopt::linger, 0);
    flood.back().connect(ep);
    planner::device_spec d;
    d.id = 0;
    wire::envelope j;
    j.sender = "flood-" + std::to_string(i);
    j.msg = wire::join_msg{j.sender, {d}, ""};
    comm::packet jp;
    jp.header = wire::encode(j);
    REQUIRE(comm::send_packet(flood.back(), std::move(jp), false));
  }
  int accepted = 0, refused = 0;
  for (auto& s : flood) {
    auto got = comm::recv_packet(s, false, std::chrono::milliseconds(5000));
    REQUIRE(got);
    REQUIRE(*got);
    auto env = wire::decode((*got)->header.data(), (*got)->header.size());
    REQUIRE(env);
    (std::get<wire::welcome_msg>(env->msg).accepted ? accepted : refused)++;
  }
  CHECK(accepted == 1);
  CHECK(refused == 99);
  CHECK(answers());
  done = true;
  trickle.join();
  ::close(slow);
  (*hub)->stop();
}

TEST_CASE("who may send what over CURVE: the permission table of docs/SECURITY.md", "[remote][curve]") {
  using r = comm::key_role;
  const wire::body join = wire::join_msg{"n", {}, ""}, beat = wire::heartbeat_msg{"n", 0}, leave = wire::leave_msg{"n", {1}, "x"};
  const wire::body fault = wire::fault_command{}, call = wire::device_call{};
  struct row {
    const wire::body* body;
    bool node, op;
  };
  for (const auto& [body, node, op] : {row{&join, true, false}, row{&beat, true, false}, row{&call, true, false},
                                       row{&leave, true, true}, row{&fault, false, true}}) {
    CHECK(!remote::refusal(r::node, *body) == node);
    CHECK(!remote::refusal(r::operator_, *body) == op);
    CHECK(remote::refusal(r::controller, *body));  // a controller key never speaks to a controller
    CHECK(remote::refusal(std::nullopt, *body));   // nor does an unauthenticated sender
  }
}
