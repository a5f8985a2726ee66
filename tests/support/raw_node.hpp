// Fakes for tests of the controller's ROUTER (actors/remote/hub.hpp): a controller's settings
// for the built-in mlp, and a node speaking the wire protocol by hand on a DEALER socket, so
// that a test can do what a real node never would.
#pragma once

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/remote/frames.hpp"
#include "actors/remote/hub.hpp"
#include "wire/codec.hpp"

// A controller's settings for the built-in mlp over these devices.
inline dynapar::actors::remote::remote_config mlp_job(std::set<int> devices) {
  dynapar::actors::remote::remote_config rc;
  rc.model = "mlp";
  rc.devices = std::move(devices);
  return rc;
}

struct raw_node {
  raw_node(zmq::context_t& ctx, const std::string& ep, std::string id) : s(ctx, zmq::socket_type::dealer), name(std::move(id)) {
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::routing_id, this->name);
    s.connect(ep);
  }
  void send(dynapar::wire::body b) {
    dynapar::wire::envelope e;
    e.sender = name;
    e.msg = std::move(b);
    dynapar::comm::packet p;
    p.header = dynapar::wire::encode(e);
    REQUIRE(dynapar::comm::send_packet(s, std::move(p), false));
  }
  // The next message of type T from the controller and its tensors, skipping heartbeats and
  // peer lists.
  template <class T>
  std::pair<T, std::vector<dynapar::model::tensor>> next_with_tensors() {
    for (int i = 0; i < 100; ++i) {
      auto got = dynapar::comm::recv_packet(s, false, std::chrono::milliseconds(5000));
      REQUIRE(got);
      REQUIRE(*got);
      auto u = dynapar::actors::remote::unpack(**got);
      REQUIRE(u);
      if (auto* x = std::get_if<T>(&u->env.msg)) return {*x, u->tensors};
    }
    FAIL("no such message");
    return {};
  }
  template <class T>
  T next() {
    return next_with_tensors<T>().first;
  }
  // Joins hosting `device`; the controller must accept.
  void join(int device) {
    dynapar::planner::device_spec d;
    d.id = device;
    send(dynapar::wire::join_msg{name, {d}, ""});
    REQUIRE(next<dynapar::wire::welcome_msg>().accepted);
  }
  zmq::socket_t s;
  std::string name;
};
