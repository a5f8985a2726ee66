// The controller's ROUTER and who it admits: unknown devices, another protocol version,
// addresses beyond loopback, unproven data sets and models, silent controllers, CURVE keys
// and their permissions, and peers that are slow, flood or send oversized frames.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/remote/node.hpp"
#include "actors/remote/hub.hpp"
#include "actors/remote/frames.hpp"
#include "data/dataset.hpp"
#include "data/source.hpp"
#include "support/loopback.hpp"
#include "support/raw_node.hpp"
#include "wire/codec.hpp"

using namespace dynapar;
namespace remote = dynapar::actors::remote;

namespace {

// A node of the controller at `ep` hosting device `id`, waiting `timeout_s` for its welcome.
actors::remote::node_config node_of(const std::string& ep, int id, double timeout_s) {
  actors::remote::node_config n;
  n.controller = ep;
  n.connect_timeout_s = timeout_s;
  planner::device_spec dev;
  dev.id = id;
  n.devices = {dev};
  return n;
}

}  // namespace

TEST_CASE("the controller refuses unknown devices, another protocol version and public addresses", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(1));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto rc = mlp_job({0, 1});

  rc.bind = "tcp://0.0.0.0:0";
  auto open = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE_FALSE(open);
  CHECK(open.err().message.find("--allow-remote") != std::string::npos);

  rc.bind = "tcp://127.0.0.1:0";
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();

  auto n = node_of(ep, 7, 5);
  std::atomic<bool> leave{false};
  auto r = actors::remote::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "refused");
  CHECK(r.err().message.find("device 7 is not in the job") != std::string::npos);

  auto l = actors::remote::request_leave({ep, 5, false, std::nullopt}, {5});
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
  rc.data.kind = "synthetic", rc.data.synthetic_samples = 64, rc.data.seed = 4;
  rc.data_hash = data::fingerprint(d);
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);

  zmq::context_t ctx{1};
  raw_node n(ctx, (*hub)->endpoint(), "raw-node");
  planner::device_spec dev;
  dev.id = 0;
  n.send(wire::join_msg{"raw-node", {dev}, ""});
  const auto w = n.next<wire::welcome_msg>();
  REQUIRE(w.accepted);
  CHECK((data::decode(w.data)->kind == "synthetic" && data::decode(w.data)->seed == 4 && w.data_samples == 64 && w.data_hash == rc.data_hash));

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
    n.send(wire::heartbeat_msg{"raw-node", 0, hash});
    n.send(wire::leave_msg{"raw-node", {99}, "sync"});
    CHECK(n.next<wire::welcome_msg>().reason.find("device 99 is not in the run") != std::string::npos);
  };
  const auto proxy = (*hub)->proxy(0);
  for (const std::uint64_t hash : {rc.data_hash + 1, rc.data_hash}) {
    beat(hash);
    caf::anon_send(proxy, actors::step_atom::value, t);
    auto [call, tensors] = n.next_with_tensors<wire::device_call>();
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

TEST_CASE("a node that describes itself gets the job's lowest free ids and keeps the memory it said", "[remote]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto hub = actors::remote::remote_devices::start(sys, *m, mlp_job({0, 1, 2, 3}));
  REQUIRE(hub);
  zmq::context_t ctx{1};
  const auto spec = [](int id, double bytes) {
    planner::device_spec d;
    d.id = id;
    d.memory_bytes = bytes;
    return d;
  };
  // Node a names device 1 and describes one more: that one takes 0, the lowest free id.
  raw_node a(ctx, (*hub)->endpoint(), "a");
  a.send(wire::join_msg{"a", {spec(1, 16e9), spec(-1, 2e9)}, ""});
  auto w = a.next<wire::welcome_msg>();
  REQUIRE(w.accepted);
  CHECK(w.devices == std::vector<int>{1, 0});
  CHECK((*hub)->described_memory(0) == std::optional<double>(2e9));
  CHECK_FALSE((*hub)->described_memory(1));  // named: the job's figure holds
  // Node b asks for three: only 2 and 3 are free, so it is refused whole, naming why.
  raw_node b(ctx, (*hub)->endpoint(), "b");
  b.send(wire::join_msg{"b", {spec(-1, 1e9), spec(-1, 1e9), spec(-1, 1e9)}, ""});
  w = b.next<wire::welcome_msg>();
  CHECK_FALSE(w.accepted);
  CHECK(w.reason.find("no device of the job's cluster is free") != std::string::npos);
  CHECK((*hub)->present_ids() == std::set<int>{0, 1});
  b.send(wire::join_msg{"b", {spec(-1, 1e9), spec(-1, 3e9)}, ""});
  w = b.next<wire::welcome_msg>();
  REQUIRE(w.accepted);
  CHECK(w.devices == std::vector<int>{2, 3});
  CHECK((*hub)->described_memory(3) == std::optional<double>(3e9));
  CHECK((*hub)->present_ids() == std::set<int>{0, 1, 2, 3});
  (*hub)->stop();
}

TEST_CASE("a node gives up on a controller that does not answer", "[remote]") {
  auto n = node_of("tcp://127.0.0.1:9", 0, 0.5);  // discard: nothing answers there
  std::atomic<bool> leave{false};
  auto r = actors::remote::run_node(n, leave);
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
  auto open = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE_FALSE(open);
  CHECK(open.err().message.find("dynapar keygen") != std::string::npos);

  rc.bind = "tcp://127.0.0.1:0";
  rc.allow_remote = false;
  rc.keys = comm::server_keys{ctl, {node.pub, op.pub}, ""};
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();

  auto n = node_of(ep, 0, 10);
  std::atomic<bool> leave{false};
  n.keys = comm::client_keys{stranger, ctl.pub.key};
  auto r = actors::remote::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "auth");
  CHECK(r.err().message.find("refused this key") != std::string::npos);

  n.keys = comm::client_keys{node, make("controller", comm::key_role::controller).pub.key};  // pins another controller
  r = actors::remote::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "auth");
  CHECK((*hub)->present_ids().empty());

  // A node's key may not inject; nothing reaches the driver.
  wire::fault_command kill;
  kill.kind = wire::fault_kind::kill;
  kill.device = 1;
  auto as_node = actors::remote::request_fault({ep, 5, false, comm::client_keys{node, ctl.pub.key}}, kill);
  REQUIRE_FALSE(as_node);
  CHECK(as_node.err().message.find("needs an operator key") != std::string::npos);
  auto plain = actors::remote::request_fault({ep, 5, false, std::nullopt}, kill);
  REQUIRE_FALSE(plain);
  CHECK(plain.err().code == "auth");
  CHECK((*hub)->injected().empty());
  // An operator's key gets through to the controller's own checks.
  auto as_operator = actors::remote::request_fault({ep, 5, false, comm::client_keys{op, ctl.pub.key}}, kill);
  REQUIRE_FALSE(as_operator);
  CHECK(as_operator.err().message.find("device 1 is not in the run") != std::string::npos);
  auto l = actors::remote::request_leave({ep, 5, false, comm::client_keys{op, ctl.pub.key}}, {5});
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
  actors::remote::remote_config rc;
  rc.model = original;
  rc.devices = {0};
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
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
  auto r = actors::remote::run_node(n, leave);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "refused_model");
  CHECK(r.err().message.find("tiny_cnn.pt hashes to") != std::string::npos);

  // The same bytes as the controller's, from the node's own directory: loaded, and the node
  // serves until the controller retires its device.
  fs::copy_file(original, dir / "tiny_cnn.pt", fs::copy_options::overwrite_existing);
  (*hub)->stop();
  hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  n.controller = (*hub)->endpoint();
  std::thread node([&] { r = actors::remote::run_node(n, leave); });
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
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  auto n = node_of((*hub)->endpoint(), 1, 10);
  std::atomic<bool> leave{false};
  bool served = false;
  std::thread node([&] { served = static_cast<bool>(actors::remote::run_node(n, leave)); });
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
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  const auto ep = (*hub)->endpoint();
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  // The controller still answers, within a second.
  auto answers = [&] {
    auto l = actors::remote::request_leave({ep, 1.0, false, std::nullopt}, {5});
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

  // One identity that has not joined sends 1000 heartbeats at once: past its burst they are
  // dropped before they are decoded (remote_config::strangers), and the controller answers.
  zmq::socket_t chatty(ctx, zmq::socket_type::dealer);
  chatty.set(zmq::sockopt::linger, 0);
  chatty.connect(ep);
  const auto before = (*hub)->strangers_refused();
  for (int i = 0; i < 1000; ++i) {
    wire::envelope h;
    h.sender = "chatty";
    h.msg = wire::heartbeat_msg{};
    comm::packet hp;
    hp.header = wire::encode(h);
    REQUIRE(comm::send_packet(chatty, std::move(hp), false));
  }
  for (int i = 0; i < 100 && (*hub)->strangers_refused() - before < 900; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // 1000 less the burst (40) and what the rate (20/s) refilled meanwhile.
  CHECK((*hub)->strangers_refused() - before >= 900);
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

// A node busy loading the job's data set (issue 74: a large image folder kept nodes from
// answering for seconds, and they were taken for lost) beats `loading` meanwhile: it is not
// lost, however short the controller's node timeout, and its device joins the run only once
// the load is over, with the data set proven (sample ids, not tensors, from then on).
TEST_CASE("a node loading the data set for longer than the node timeout is not lost, and joins once loaded", "[remote]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto rc = mlp_job({0});
  rc.data.kind = "synthetic", rc.data.synthetic_samples = 64, rc.data.seed = 4;
  const auto train = data::load(rc.data, true), val = data::load(rc.data, false);
  REQUIRE((train && val));
  rc.data_hash = data::fingerprint(*train, *val);
  rc.seed = 4;  // a node's data set takes the job's seed
  rc.node_timeout_s = 0.5;
  auto hub = actors::remote::remote_devices::start(sys, *m, rc);
  REQUIRE(hub);
  auto n = node_of((*hub)->endpoint(), 0, 5);
  std::atomic<int> loads{0};
  n.load_data = [&](const data::source& s, bool split) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // each split: 2 s in all, 4 node timeouts
    ++loads;
    return data::load(s, split);
  };
  std::atomic<bool> leave{false};
  std::optional<result<actors::remote::node_outcome>> r;
  std::thread node([&] { r = actors::remote::run_node(n, leave); });
  const auto t0 = std::chrono::steady_clock::now();
  while ((*hub)->present_ids().empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    CHECK_FALSE((*hub)->lost(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(loads == 2);  // present only once both splits were loaded
  CHECK(std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(1900));
  CHECK((*hub)->present_ids() == std::set<int>{0});
  CHECK_FALSE((*hub)->lost(0));
  CHECK((*hub)->builds_samples(0));  // the heartbeat after the load proved the set
  (*hub)->stop();
  node.join();
  REQUIRE(r);
  CHECK(*r);
}
