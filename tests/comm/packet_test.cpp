// Sending without waiting (comm/packet.hpp): a queue at its HWM refuses the message whole,
// and a ROUTER told to be strict says which route it does not know, over real sockets.
#include <catch2/catch.hpp>

#include "comm/packet.hpp"

using namespace dynapar;

namespace {
comm::packet packet_of(const std::string& route, std::size_t blobs) {
  comm::packet p;
  p.route = route;
  p.header = {1, 2, 3};
  for (std::size_t i = 0; i < blobs; ++i) {
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(16, std::uint8_t(i));
    p.blobs.push_back(blob{bytes->data(), bytes->size(), bytes});
  }
  return p;
}
}  // namespace

TEST_CASE("a full queue refuses a message whole, an unknown route is named", "[unit][comm]") {
  zmq::context_t ctx{1};
  SECTION("a dealer whose peer never listens: its queue fills at the HWM") {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    d.set(zmq::sockopt::sndhwm, 5);
    d.connect("tcp://127.0.0.1:9");  // nothing listens: the messages stay queued
    int queued = 0, full = 0;
    for (int i = 0; i < 12; ++i) {
      auto st = comm::send_packet(d, packet_of("", 2), false, true);
      if (st) ++queued;
      else if (st.err().code == "full") ++full;
    }
    CHECK(queued == 5);
    CHECK(full == 7);
  }
  SECTION("a strict router: a route nobody holds is unreachable") {
    zmq::socket_t r(ctx, zmq::socket_type::router);
    r.set(zmq::sockopt::linger, 0);
    r.set(zmq::sockopt::router_mandatory, 1);
    r.bind("tcp://127.0.0.1:0");
    auto st = comm::send_packet(r, packet_of("nobody", 1), true, true);
    REQUIRE_FALSE(st);
    CHECK(st.err().code == "unreachable");
    CHECK(st.err().message.find("'nobody'") != std::string::npos);
  }
}
