// Every control-plane message survives encode -> decode unchanged.
#include <catch2/catch.hpp>

#include <cmath>

#include "wire/codec.hpp"

using namespace dynapar;
using namespace dynapar::wire;

namespace {
envelope round_trip(const envelope& e) {
  auto bytes = encode(e);
  auto back = decode(bytes.data(), bytes.size());
  INFO((back ? std::string("ok") : back.err().message));
  REQUIRE(back);
  CHECK(back->version == protocol_version);
  CHECK(back->sender == e.sender);
  CHECK(back->seq == e.seq);
  return *back;
}

envelope wrap(body b) { return envelope{protocol_version, "node-a", 42, std::move(b)}; }

}  // namespace

TEST_CASE("join, leave, heartbeat, fault and welcome round-trip", "[unit][wire]") {
  planner::device_spec d;
  d.id = 5;
  d.name = "t4-0";
  d.speed = 2.5;
  d.memory_bytes = 16e9;
  d.price_per_s = 1e-4;
  d.power_w = 70;
  d.node = 3;
  d.rack = 1;
  d.nic_bw = 1.25e9;
  planner::device_spec e = d;
  e.id = 6;
  e.nic_bw = planner::unlimited;
  auto j = std::get<join_msg>(round_trip(wrap(join_msg{"node-3", {d, e}, "tcp://127.0.0.1:40123"})).msg);
  REQUIRE(j.devices.size() == 2);
  CHECK(j.data_endpoint == "tcp://127.0.0.1:40123");
  CHECK(j.node == "node-3");
  CHECK(j.devices[0].name == "t4-0");
  CHECK(j.devices[0].speed == 2.5);
  CHECK(j.devices[0].nic_bw == 1.25e9);
  CHECK(j.devices[1].nic_bw == planner::unlimited);
  CHECK(j.devices[1].rack == 1);

  auto l = std::get<leave_msg>(round_trip(wrap(leave_msg{"node-3", {5, 6}, "SIGTERM"})).msg);
  CHECK(l.devices == std::vector<int>{5, 6});
  CHECK(l.reason == "SIGTERM");

  auto h = std::get<heartbeat_msg>(round_trip(wrap(heartbeat_msg{"node-3", 123456789, 0xfedcba9876543210ull, 187.25})).msg);
  CHECK((h.time_ns == 123456789 && h.data_hash == 0xfedcba9876543210ull && h.peak_rss_mb == 187.25));
  for (double peak : {-1.0, std::nan(""), 1e12}) {  // a node's memory is a size
    const auto bytes = encode(wrap(heartbeat_msg{"node-3", 0, 0, peak}));
    auto refused = decode(bytes.data(), bytes.size());
    REQUIRE_FALSE(refused);
    CHECK(refused.err().message.find("heartbeat.peakRssMb") != std::string::npos);
  }

  fault_command f{fault_kind::slow, 5, 0.25, 10, -1};
  auto fb = std::get<fault_command>(round_trip(wrap(f)).msg);
  CHECK(fb.kind == fault_kind::slow);
  CHECK(fb.factor == 0.25);
  CHECK(fb.duration_steps == 10);
  fault_command pause{fault_kind::pause, 2, 1, 0, -1, 4.5};
  CHECK(std::get<fault_command>(round_trip(wrap(pause)).msg).duration_s == 4.5);
  welcome_msg again;
  again.rejoin = true;
  again.reason = "join again";
  auto ab = std::get<welcome_msg>(round_trip(wrap(again)).msg);
  CHECK(ab.rejoin);
  CHECK_FALSE(ab.accepted);
  welcome_msg pinned;
  pinned.accepted = true;
  pinned.devices = {0};
  pinned.model = "models/tiny_cnn.pt";
  pinned.model_hash = std::string(64, 'a');
  CHECK(std::get<welcome_msg>(round_trip(wrap(pinned)).msg).model_hash == pinned.model_hash);
  welcome_msg with_data = pinned;
  with_data.data = "synthetic";
  with_data.data_samples = 6000;
  with_data.data_hash = 0x8000000000000001ull;
  const auto wd = std::get<welcome_msg>(round_trip(wrap(with_data)).msg);
  CHECK((wd.data == "synthetic" && wd.data_samples == 6000 && wd.data_hash == 0x8000000000000001ull));
  pinned.model_hash = "not-a-sha256";
  const auto bad_bytes = encode(wrap(pinned));
  auto bad_hash = decode(bad_bytes.data(), bad_bytes.size());
  REQUIRE_FALSE(bad_hash);
  CHECK(bad_hash.err().message.find("welcome.modelHash") != std::string::npos);

}

TEST_CASE("the data plane's membership list round-trips", "[unit][wire]") {
  peers_msg m;
  m.generation = 9;
  m.peers.push_back({"node-a", "tcp://127.0.0.1:4001", std::string(40, 'x'), {0, 2}});
  m.peers.push_back({"node-b", "tcp://10.0.0.7:4002", "", {1}});
  auto back = std::get<peers_msg>(round_trip(wrap(m)).msg);
  CHECK(back.generation == 9);
  REQUIRE(back.peers.size() == 2);
  CHECK(back.peers[0].node == "node-a");
  CHECK(back.peers[0].public_key == std::string(40, 'x'));
  CHECK(back.peers[0].devices == std::vector<int>{0, 2});
  CHECK(back.peers[1].endpoint == "tcp://10.0.0.7:4002");
  CHECK(back.peers[1].public_key.empty());
}

TEST_CASE("a Welcome round-trips with its optimizer", "[unit][wire]") {
  welcome_msg w;
  w.accepted = true;
  w.devices = {2, 3};
  w.model = "cnn";
  w.seed = 9;
  w.optimizer = "sgd";
  w.lr = 0.05;
  w.momentum = 0.9;
  w.weight_decay = 1e-4;
  w.nesterov = true;
  const auto back = std::get<welcome_msg>(round_trip(wrap(w)).msg);
  CHECK(back.optimizer == "sgd");
  CHECK(back.lr == 0.05);
  CHECK(back.momentum == 0.9);
  CHECK(back.weight_decay == 1e-4);
  CHECK(back.nesterov);
  w.nesterov = false;
  CHECK_FALSE(std::get<welcome_msg>(round_trip(wrap(w)).msg).nesterov);
  CHECK(back.schedule.kind == "constant");  // none set: the rate is lr at every step
  CHECK(back.label_smoothing == 0);
  w.label_smoothing = 0.1;
  CHECK(std::get<welcome_msg>(round_trip(wrap(w)).msg).label_smoothing == 0.1);
  CHECK_FALSE(back.bf16);
  w.bf16 = true;
  CHECK(std::get<welcome_msg>(round_trip(wrap(w)).msg).bf16);
  w.schedule = {"cosine", 7, 90, 1, 0.1, 1e-4};
  const auto cos = std::get<welcome_msg>(round_trip(wrap(w)).msg).schedule;
  CHECK(cos.kind == "cosine");
  CHECK(cos.warmup_steps == 7);
  CHECK(cos.steps == 90);
  CHECK(cos.min_lr == 1e-4);
  w.schedule = {"step", 0, 0, 30, 0.5, 0};
  const auto st = std::get<welcome_msg>(round_trip(wrap(w)).msg).schedule;
  CHECK(st.kind == "step");
  CHECK(st.step_size == 30);
  CHECK(st.gamma == 0.5);
}
