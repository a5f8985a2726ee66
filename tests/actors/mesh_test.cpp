// The data plane between node processes (actors/remote/mesh.hpp), over real TCP sockets on
// loopback: data reaches the node the controller's list says hosts the device, and a node
// takes data only from the peers of the newest list (by name, and over CURVE by key).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "actors/remote/mesh.hpp"

using namespace dynapar;
using actors::remote::mesh_config;
using actors::remote::node_mesh;

namespace {

std::unique_ptr<node_mesh> mesh(zmq::context_t& ctx, const std::string& name, std::optional<comm::client_keys> keys = {}) {
  mesh_config c;
  c.keys = std::move(keys);
  auto m = node_mesh::start(ctx, name, c);
  REQUIRE(m);
  return std::move(*m);
}

comm::packet packet_of(const std::string& text) {
  comm::packet p;
  p.header.assign(text.begin(), text.end());
  return p;
}

// What `m` receives within `ms` (the peers connect asynchronously), or nothing.
std::optional<comm::packet> await(node_mesh& m, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    auto p = m.receive(std::chrono::milliseconds(20));
    REQUIRE(p);
    if (*p) return std::move(**p);
  }
  return std::nullopt;
}

comm::key_pair key(const std::string& name) {
  auto k = comm::make_key_pair(name, comm::key_role::node);
  REQUIRE(k);
  return *k;
}

}  // namespace

TEST_CASE("node to node: data goes to the device's host, and only current peers are heard", "[remote][mesh]") {
  zmq::context_t ctx{1};
  auto a = mesh(ctx, "node-a"), b = mesh(ctx, "node-b"), c = mesh(ctx, "node-c");
  wire::peers_msg list{3, {{"node-a", a->endpoint(), "", {0, 2}}, {"node-b", b->endpoint(), "", {1}}}};
  a->update(list);
  b->update(list);

  auto p = packet_of("activation for device 1");
  REQUIRE(a->send(1, p));
  auto got = await(*b, 3000);
  REQUIRE(got);
  CHECK(got->route == "node-a");
  CHECK(std::string(got->header.begin(), got->header.end()) == "activation for device 1");

  // No peer hosts device 7: the packet stays with the caller, who relays it.
  auto q = packet_of("for device 7");
  CHECK_FALSE(a->send(7, q));
  CHECK(q.header.size() == 12);

  // node-c is not in b's list: what it sends is dropped, however it learnt b's address.
  c->update(wire::peers_msg{1, {{"node-b", b->endpoint(), "", {1}}}});
  auto r = packet_of("from a stranger");
  REQUIRE(c->send(1, r));
  CHECK_FALSE(await(*b, 500));
  CHECK(b->refused() == 1);

  // An older list changes nothing; a newer one without node-a fences it at once.
  b->update(wire::peers_msg{2, {{"node-b", b->endpoint(), "", {1}}}});
  auto s = packet_of("still a peer");
  REQUIRE(a->send(1, s));
  REQUIRE(await(*b, 3000));
  b->update(wire::peers_msg{4, {{"node-b", b->endpoint(), "", {1}}}});
  auto t = packet_of("fenced");
  REQUIRE(a->send(1, t));
  CHECK_FALSE(await(*b, 500));
  CHECK(b->refused() == 2);
}

TEST_CASE("node to node over CURVE: a key the controller did not list cannot connect", "[remote][mesh][curve]") {
  zmq::context_t ca{1}, cb{1}, cd{1};  // one ZAP handler per context, as in separate processes
  const auto ka = key("node-a"), kb = key("node-b"), kc = key("node-c");
  const std::string ctl = key("controller").pub.key;
  auto a = mesh(ca, "node-a", comm::client_keys{ka, ctl}), b = mesh(cb, "node-b", comm::client_keys{kb, ctl});
  wire::peers_msg list{1, {{"node-a", a->endpoint(), ka.pub.key, {0}}, {"node-b", b->endpoint(), kb.pub.key, {1}}}};
  a->update(list);
  b->update(list);
  auto p = packet_of("encrypted");
  REQUIRE(a->send(1, p));
  auto got = await(*b, 3000);
  REQUIRE(got);
  CHECK(got->peer == "node:" + ka.pub.key);  // the key that sent it

  // node-c claims to be node-a, but its key is not node-a's: the handshake is refused.
  auto d = mesh(cd, "node-a", comm::client_keys{kc, ctl});
  d->update(wire::peers_msg{1, {{"node-b", b->endpoint(), kb.pub.key, {1}}}});
  auto q = packet_of("forged");
  REQUIRE(d->send(1, q));
  CHECK_FALSE(await(*b, 800));

  // node-c is a member, with its own key, and sends under node-a's routing id: its key is not
  // the one listed for node-a, nothing arrives.
  zmq::context_t ce{1};
  auto e = mesh(ce, "node-a", comm::client_keys{kc, ctl});
  const wire::peers_msg three{2, {{"node-a", a->endpoint(), ka.pub.key, {0}}, {"node-b", b->endpoint(), kb.pub.key, {1}},
                                  {"node-c", e->endpoint(), kc.pub.key, {2}}}};
  b->update(three);
  e->update(three);
  const auto refused = b->refused();
  auto f = packet_of("as node-a");
  REQUIRE(e->send(1, f));
  CHECK_FALSE(await(*b, 800));
  CHECK(b->refused() > refused);

  // Pinning the wrong key for b: b's handshake cannot prove it, nothing arrives.
  a->update(wire::peers_msg{3, {{"node-a", a->endpoint(), ka.pub.key, {0}}, {"node-b", b->endpoint(), kc.pub.key, {1}}}});
  auto r = packet_of("to an impostor?");
  REQUIRE(a->send(1, r));
  CHECK_FALSE(await(*b, 800));
}

TEST_CASE("a data address that other nodes could not reach is refused, naming the fix", "[remote][mesh]") {
  zmq::context_t ctx{1};
  mesh_config c;
  c.bind = "tcp://0.0.0.0:0";
  c.allow_remote = true;
  c.keys = comm::client_keys{key("n"), key("controller").pub.key};
  auto m = node_mesh::start(ctx, "n", c);
  REQUIRE_FALSE(m);
  CHECK(m.err().message.find("this machine's own address") != std::string::npos);
  c.bind = "tcp://10.1.2.3:0";
  c.keys.reset();
  m = node_mesh::start(ctx, "n", c);
  REQUIRE_FALSE(m);
  CHECK(m.err().message.find("--data-bind") != std::string::npos);
  CHECK(m.err().message.find("CURVE keys") != std::string::npos);
}
