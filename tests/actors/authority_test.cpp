// Per-node authority (docs/SECURITY.md): a node speaks only for the devices it hosts. Two raw
// nodes, each hosting one device; the second misbehaves toward the first's device.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <mutex>
#include <thread>

#include "actors/device_actor.hpp"
#include "data/dataset.hpp"
#include "schedule/schedule.hpp"
#include "support/raw_node.hpp"

using namespace dynapar;

TEST_CASE("a node cannot answer, report lost or retire for a device it does not host", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto hub = actors::remote::remote_devices::start(sys, *m, mlp_job({0, 1}));
  REQUIRE(hub);
  zmq::context_t ctx{1};
  raw_node a(ctx, (*hub)->endpoint(), "node-a"), b(ctx, (*hub)->endpoint(), "node-b");
  a.join(0);
  b.join(1);
  const auto proxy = (*hub)->proxy(0);
  caf::scoped_actor self{sys};
  // A probe of device 0 through its proxy: node-a gets the call; node-b forges the answer
  // first, node-a answers after. Only node-a's answer may count.
  auto probe_answered_by_a = [&](double a_says) {
    auto h = self->request(proxy, std::chrono::seconds(10), actors::probe_atom::value);
    const auto call = a.next<wire::device_call>();
    REQUIRE(std::holds_alternative<wire::ops::probe>(call.op));
    b.send(wire::device_call{call.id, 0, wire::ops::probed{99.0}, {}});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    a.send(wire::device_call{call.id, 0, wire::ops::probed{a_says}, {}});
    double got = -1;
    std::string error;
    h.receive([&](double s) { got = s; }, [&](caf::error& e) { error = to_string(e); });
    INFO(error);
    CHECK(got == a_says);
  };
  probe_answered_by_a(1.5);
  // The controller's "node lost" signal (an error call with id 0), forged for device 0:
  // dropped, so device 0 still answers through its proxy.
  b.send(wire::device_call{0, 0, wire::ops::error{"node 'node-a' lost (forged)"}, {}});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE((*hub)->lost(0));
  probe_answered_by_a(2.5);
  // A leave naming another node's device is refused; its own is accepted.
  b.send(wire::leave_msg{"node-b", {0}, "forged"});
  const auto refused = b.next<wire::welcome_msg>();
  CHECK_FALSE(refused.accepted);
  CHECK(refused.reason.find("device 0 is hosted by another node") != std::string::npos);
  b.send(wire::leave_msg{"node-b", {1}, "done"});
  CHECK(b.next<wire::welcome_msg>().accepted);
  (*hub)->stop();
}

namespace {
// Whether `n` gets a device call carrying `Op` from the controller within `ms` (heartbeats
// and peer lists skipped).
template <class Op>
bool gets(raw_node& n, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    auto got = comm::recv_packet(n.s, false, std::chrono::milliseconds(50));
    REQUIRE(got);
    if (!*got) continue;
    auto u = actors::remote::unpack(**got);
    REQUIRE(u);
    if (const auto* c = std::get_if<wire::device_call>(&u->env.msg); c && std::holds_alternative<Op>(c->op)) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("the controller relays data only as the sender's own devices' (authority on the data plane)", "[remote]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto hub = actors::remote::remote_devices::start(sys, *m, mlp_job({0, 1, 2}));
  REQUIRE(hub);
  zmq::context_t ctx{1};
  raw_node a(ctx, (*hub)->endpoint(), "node-a"), b(ctx, (*hub)->endpoint(), "node-b");
  a.join(0);
  a.join(2);
  b.join(1);
  const auto tensor = model::filled_tensor(4, 1.0f);
  // node-b sends device 0 an activation as device 2's (node-a's), then a gradient and a
  // migrating layer as if from device 2: none is relayed.
  auto forged = [&](wire::device_op op, std::vector<model::tensor> ts) {
    wire::device_call c{0, 0, std::move(op), {}};
    auto p = actors::remote::pack(c, ts, "node-b");
    REQUIRE(comm::send_packet(b.s, std::move(p), false));
  };
  forged(wire::ops::activation{1, 0, 2}, {tensor});
  CHECK_FALSE(gets<wire::ops::activation>(a, 600));
  forged(wire::ops::gradient{1, 0, 2}, {tensor});
  CHECK_FALSE(gets<wire::ops::gradient>(a, 600));
  std::vector<model::tensor> layer;
  auto moving = actors::remote::layer_of(0, 2, 0, 0, model::copy_layer(**m, 0), layer);
  forged(moving, layer);
  CHECK_FALSE(gets<wire::ops::hold>(a, 600));
  forged(wire::ops::reduce_part{1, 0, false, 0, {{0, 0}}, 2}, {tensor});  // a sum's chunk as device 2's
  CHECK_FALSE(gets<wire::ops::reduce_part>(a, 600));
  // As its own device's: relayed.
  forged(wire::ops::activation{1, 0, 1}, {tensor});
  CHECK(gets<wire::ops::activation>(a, 3000));
  (*hub)->stop();
}

namespace {
// A previous stage that records the gradients a device sends it: (sending device, step).
struct grads_seen {
  std::vector<std::pair<int, std::int64_t>> got;
  std::mutex mu;
};
actors::device_peer::behavior_type recording_peer(actors::device_peer::pointer, std::shared_ptr<grads_seen> seen) {
  return {
      [](actors::act_atom, std::int64_t, int, int, const model::tensor&) {},
      [seen](actors::grad_atom, std::int64_t step, int, int from, const model::tensor&) {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->got.emplace_back(from, step);
      },
      [](actors::part_atom, const actors::reduce_part&) {},
      [](actors::hold_atom, const actors::layer_transfer&) {},
  };
}

// A holder's peers as another holder sees them: what it sends them is kept, to be passed on
// (or forged) by the test.
struct parts_seen {
  std::vector<actors::reduce_part> got;
  std::mutex mu;
};
actors::device_peer::behavior_type parts_peer(actors::device_peer::pointer, std::shared_ptr<parts_seen> seen) {
  return {
      [](actors::act_atom, std::int64_t, int, int, const model::tensor&) {},
      [](actors::grad_atom, std::int64_t, int, int, const model::tensor&) {},
      [seen](actors::part_atom, const actors::reduce_part& p) {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->got.push_back(p);
      },
      [](actors::hold_atom, const actors::layer_transfer&) {},
  };
}

// The last of two stages of `m` in step 5, one micro-batch (the step's `first_micro`), whose
// input comes from device 0 (`prev`): a device holding layers 1.. and its task, and what
// device 0 sends it (layer 0 on the batch).
struct last_stage {
  actors::device_handle dev;
  actors::stage_task task;
  model::tensor x;
};
last_stage last_stage_of(caf::actor_system& sys, caf::scoped_actor& self, const model::model_chain& m, int id, const actors::device_peer& prev,
                         int first_micro = 0) {
  const int L = model::num_layers(m);
  last_stage out;
  actors::device_config dc;
  dc.id = id;
  out.dev = actors::spawn_device(sys, dc);
  for (int l = 1; l < L; ++l)
    self->request(out.dev, std::chrono::seconds(10), actors::hold_atom::value, l, model::copy_layer(m, l)).receive([](bool) {}, [](caf::error& e) { FAIL(to_string(e)); });
  const auto d = data::synthetic(8, 3);
  const std::vector<int> order{0, 1, 2, 3};
  auto& t = out.task;
  t.tag = 5;
  t.lo = 1;
  t.hi = L;
  t.program = schedule::generate(planner::schedule_kind::one_f_one_b, 2, 1).programs[1];
  t.targets.push_back(model::targets(d, order, 0, 4));
  t.prev = prev;
  t.prev_id = 0;
  t.first_micro = first_micro;
  t.report_to = caf::actor_cast<actors::stage_sink>(self);
  auto first = model::make_worker(model::optimizer_config{}, "cpu");
  first->hold(0, model::copy_layer(m, 0));
  first->begin_step(5, 0, false);
  auto x = first->forward(0, 0, 1, model::inputs(d, order, 0, 4));
  REQUIRE(x);
  out.x = *x;
  return out;
}
}  // namespace

TEST_CASE("a device takes a step's activations only from the stage its task names", "[remote][authority]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  auto seen = std::make_shared<grads_seen>();
  auto prev = sys.spawn(recording_peer, seen);
  caf::scoped_actor self{sys};
  auto [dev, t, x] = last_stage_of(sys, self, **m, 1, prev);
  // Before the task (the next step's, early) and during it, from device 7: dropped.
  self->send(dev, actors::act_atom::value, std::int64_t{5}, 0, 7, x);
  self->send(dev, actors::step_atom::value, t);
  self->send(dev, actors::act_atom::value, std::int64_t{5}, 0, 7, x);
  bool ran = false;
  self->receive([&](const actors::stage_report&) { ran = true; }, caf::after(std::chrono::milliseconds(600)) >> [] {});
  CHECK_FALSE(ran);
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    CHECK(seen->got.empty());  // nothing ran: no gradient went back
  }
  // From device 0: the stage runs and sends its gradient back as device 1's.
  self->send(dev, actors::act_atom::value, std::int64_t{5}, 0, 0, x);
  std::string error;
  self->receive([&](const actors::stage_report& r) { error = r.error; }, caf::after(std::chrono::seconds(10)) >> [&] { error = "no report"; });
  CHECK(error.empty());
  // The gradient reaches the recording peer on its own thread, maybe after the report.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto got = [&] {
    std::lock_guard<std::mutex> lock(seen->mu);
    return seen->got;
  };
  while (got().empty() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(got().size() == 1);
  CHECK(got().front() == std::make_pair(1, std::int64_t{5}));
  anon_send_exit(dev, caf::exit_reason::user_shutdown);
  anon_send_exit(prev, caf::exit_reason::user_shutdown);
}

TEST_CASE("a device takes a migrating layer only when a migration announced it, from the giver named", "[remote][authority]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  actors::device_config dc;
  dc.id = 1;
  auto dev = actors::spawn_device(sys, dc);
  auto elsewhere = sys.spawn(recording_peer, std::make_shared<grads_seen>());
  caf::scoped_actor self{sys};
  const auto sink = caf::actor_cast<actors::migration_sink>(self);
  const auto replica = model::copy_layer(**m, 0);
  auto send_layer = [&](int from) {
    self->send(dev, actors::hold_atom::value, actors::layer_transfer{0, from, 1, replica, model::bytes(replica), sink});
  };
  auto arrived = [&] {
    bool got = false;
    self->receive([&](actors::moved_atom, int, int, int, std::size_t) { got = true; },
                  [&](actors::moved_atom, int, int, int, const std::string&) { got = true; },
                  caf::after(std::chrono::milliseconds(500)) >> [] {});
    return got;
  };
  // Whether the device holds layer 0: only a holder can send it on.
  auto holds = [&] {
    bool held = false;
    self->request(dev, std::chrono::seconds(10), actors::migrate_atom::value, 0, 5, caf::actor_cast<actors::device_peer>(elsewhere),
                  comm::link_spec{}, sink)
        .receive([&](bool) { held = true; }, [](caf::error&) {});
    return held;
  };
  auto expect = [&](int from) {
    self->request(dev, std::chrono::seconds(10), actors::expect_atom::value, 0, from).receive([](bool) {}, [](caf::error& e) { FAIL(to_string(e)); });
  };
  send_layer(3);  // no migration announced: refused, nothing installed
  CHECK_FALSE(arrived());
  CHECK_FALSE(holds());
  expect(2);
  send_layer(3);  // announced from device 2, sent as device 3's
  CHECK_FALSE(arrived());
  CHECK_FALSE(holds());
  send_layer(2);
  CHECK(arrived());
  CHECK(holds());
  send_layer(2);  // an announcement is taken once
  CHECK_FALSE(arrived());
  anon_send_exit(dev, caf::exit_reason::user_shutdown);
  anon_send_exit(elsewhere, caf::exit_reason::user_shutdown);
}

TEST_CASE("a holder takes a sum's chunk only from the device its holders list at the rank named", "[remote][authority]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  caf::actor_system sys{cfg};
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  caf::scoped_actor self{sys};
  // Devices 1 and 2 run the same last stage on a micro-batch each (data parallelism), so
  // both hold partial sums of layer 1; device 2's chunks for device 1 go to a recorder first.
  auto prev = sys.spawn(recording_peer, std::make_shared<grads_seen>());
  auto seen = std::make_shared<parts_seen>();
  auto relay = sys.spawn(parts_peer, seen);
  std::map<int, actors::device_handle> devs;
  for (int id : {1, 2}) {
    auto stage = last_stage_of(sys, self, **m, id, prev, id - 1);  // the step's micro-batches 0 and 1
    devs[id] = stage.dev;
    self->send(stage.dev, actors::step_atom::value, stage.task);
    self->send(stage.dev, actors::act_atom::value, std::int64_t{5}, 0, 0, stage.x);
    std::string error = "no report";
    self->receive([&](const actors::stage_report& r) { error = r.error; }, caf::after(std::chrono::seconds(10)) >> [] {});
    REQUIRE(error.empty());
  }
  actors::reduce_task r;
  r.tag = 5;
  r.layer = 1;
  r.micro_batches = 2;
  r.holders = {1, 2};
  auto r1 = r, r2 = r;
  r1.peers = {caf::actor_cast<actors::device_peer>(devs[1]), caf::actor_cast<actors::device_peer>(devs[2])};
  r2.peers = {caf::actor_cast<actors::device_peer>(relay), caf::actor_cast<actors::device_peer>(devs[2])};
  auto h1 = self->request(devs[1], std::chrono::seconds(10), actors::reduce_atom::value, r1);
  auto h2 = self->request(devs[2], std::chrono::seconds(10), actors::reduce_atom::value, r2);
  // Each of device 2's chunks for device 1 (its scatter, then its gather): first forged, as
  // device 3's under device 2's rank and with other numbers, then as device 2 sent it.
  std::size_t passed = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (passed < 2 && std::chrono::steady_clock::now() < until) {
    std::vector<actors::reduce_part> todo;
    {
      std::lock_guard<std::mutex> lock(seen->mu);
      todo.assign(seen->got.begin() + static_cast<std::ptrdiff_t>(passed), seen->got.end());
    }
    for (auto& p : todo) {
      CHECK(p.device == 2);
      auto forged = p;
      forged.device = 3;
      for (auto& part : forged.msg.parts)
        for (auto& g : part.grads) g = model::filled_tensor(7, 1.0f);
      self->send(devs[1], actors::part_atom::value, forged);
      self->send(devs[1], actors::part_atom::value, p);
      ++passed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(passed == 2);
  for (auto* h : {&h1, &h2}) h->receive([](const actors::sum_held&) {}, [](caf::error& e) { FAIL(to_string(e)); });
  // Both commit the same sum: the same layer afterwards.
  std::vector<std::uint64_t> hashes;
  for (int id : {1, 2}) {
    self->request(devs[id], std::chrono::seconds(10), actors::commit_atom::value, std::int64_t{5}, 1, 2.0, 1.0)
        .receive([](const actors::applied&) {}, [](caf::error& e) { FAIL(to_string(e)); });
    self->request(devs[id], std::chrono::seconds(10), actors::hash_atom::value, 1).receive([&](std::uint64_t v) { hashes.push_back(v); }, [](caf::error& e) { FAIL(to_string(e)); });
  }
  REQUIRE(hashes.size() == 2);
  CHECK(hashes[0] == hashes[1]);
  CHECK(hashes[0] != model::state_hashes({model::copy_layer(**m, 1)}).front());
  for (auto& [id, h] : devs) anon_send_exit(h, caf::exit_reason::user_shutdown);
  anon_send_exit(prev, caf::exit_reason::user_shutdown);
  anon_send_exit(relay, caf::exit_reason::user_shutdown);
}
