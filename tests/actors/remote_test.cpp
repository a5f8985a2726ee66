// Device calls between processes: tensors and layers survive the wire bit for bit (through a
// real ZeroMQ socket), malformed calls are errors, and the controller's ROUTER refuses what
// it must (unknown devices, another protocol version, addresses beyond loopback).
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <cstring>

#include "actors/node_host.hpp"
#include "actors/remote_devices.hpp"
#include "actors/remote_protocol.hpp"
#include "data/dataset.hpp"
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
  for (int l = 0; l < layers; ++l) REQUIRE(w.apply(l, model::sum(w.micro_gradients(l)), n));
}

}  // namespace

TEST_CASE("tensors in device calls cross a ZeroMQ socket bit for bit", "[remote]") {
  model::set_threads(1);
  const auto d = data::synthetic(64, 5);
  std::vector<int> samples(16);
  for (int i = 0; i < 16; ++i) samples[i] = i;
  const auto x = model::inputs(d, samples, 0, 16);   // float32 [16, 1, 28, 28]
  const auto y = model::targets(d, samples, 0, 16);  // int64 [16]
  wire::device_call c;
  c.op = wire::device_op::activation;
  c.device = 3;
  c.ints = {7, 2};
  auto got = remote::unpack(through_zeromq(remote::pack(c, {x, y}, "test")));
  REQUIRE(got);
  const auto& call = std::get<wire::device_call>(got->env.msg);
  CHECK(call.device == 3);
  CHECK(call.ints == std::vector<std::int64_t>{7, 2});
  REQUIRE(got->tensors.size() == 2);
  CHECK(bytes_of(got->tensors[0]) == bytes_of(x));
  CHECK(bytes_of(got->tensors[1]) == bytes_of(y));
  CHECK(call.tensors[0].shape == std::vector<std::int64_t>{16, 1, 28, 28});
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
    const auto c = remote::layer_call(1, l, 0, 1, 0, a->copy(l), ts);
    auto got = remote::unpack(through_zeromq(remote::pack(c, ts)));
    REQUIRE(got);
    auto lm = remote::layer_from(**m, std::get<wire::device_call>(got->env.msg), got->tensors);
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

TEST_CASE("malformed device calls are errors naming what is wrong", "[remote]") {
  model::set_threads(1);
  const auto d = data::synthetic(16, 1);
  const std::vector<int> s = {0, 1, 2, 3};
  const auto x = model::inputs(d, s, 0, 4);

  // A step announcing one input and one target but carrying one tensor.
  wire::device_call step;
  step.op = wire::device_op::step;
  step.ints = {0, 0, 2, -1, -1, 1, 1};
  step.reals = {0, 0, 0, 0};
  auto t = remote::step_from(step, {x});
  REQUIRE_FALSE(t);
  CHECK(t.err().message.find("counts") != std::string::npos);
  step.ints.insert(step.ints.end(), {99, 0});  // an instruction that does not exist
  REQUIRE_FALSE(remote::step_from(step, {x, x}));

  // Gradients claiming more tensors than came.
  wire::device_call g;
  g.ints = {0, 7, 1, 0, 2, 3};
  REQUIRE_FALSE(remote::gradients_from(g, {x}));

  // A packet whose header announces two tensors but which carries one frame.
  wire::device_call c;
  c.op = wire::device_op::activation;
  auto p = remote::pack(c, {x, x});
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
  auto lc = remote::layer_call(0, 1, -1, 0, 0, model::copy_layer(**m, 1), ts);
  lc.ints[0] = 0;
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
  actors::remote_config rc;
  rc.model = "mlp";
  rc.devices = {0, 1};

  rc.bind = "tcp://0.0.0.0:0";
  auto open = actors::remote_devices::start(sys, *m, rc);
  REQUIRE_FALSE(open);
  CHECK(open.err().message.find("--allow-remote") != std::string::npos);

  rc.bind = "tcp://127.0.0.1:0";
  auto hub = actors::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();

  actors::node_config n;
  n.controller = ep;
  n.connect_timeout_s = 5;
  planner::device_spec dev;
  dev.id = 7;
  n.devices = {dev};
  std::atomic<bool> leave{false};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "refused");
  CHECK(r.err().message.find("device 7 is not in the job") != std::string::npos);

  auto l = actors::request_leave(ep, {5}, 5, false);
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
  old.msg = wire::join_msg{"old-node", {dev}};
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

TEST_CASE("a node gives up on a controller that does not answer", "[remote]") {
  actors::node_config n;
  n.controller = "tcp://127.0.0.1:9";  // discard: nothing answers there
  n.connect_timeout_s = 0.5;
  planner::device_spec dev;
  n.devices = {dev};
  std::atomic<bool> leave{false};
  auto r = actors::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "unreachable");
  CHECK(r.err().message.find("tcp://127.0.0.1:9") != std::string::npos);
}
