// Per-node authority (docs/SECURITY.md): a node speaks only for the devices it hosts. Two raw
// nodes, each hosting one device; the second misbehaves toward the first's device.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <thread>

#include "actors/device_actor.hpp"
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
