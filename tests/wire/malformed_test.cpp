// A table of malformed inputs, each rejected with its own error; none crashes.
#include <catch2/catch.hpp>

#include <cstring>

#include "common/rng.hpp"
#include "wire/codec.hpp"

using namespace dynapar;
using namespace dynapar::wire;

namespace {
// A node joining with two devices: a message with text, a list and nested structs.
join_msg good_join() {
  planner::device_spec a, b;
  a.id = 1;
  a.name = "gpu-a";
  b.id = 2;
  b.name = "gpu-b";
  return join_msg{"node-1", {a, b}, "tcp://127.0.0.1:40001"};
}
std::vector<std::uint8_t> bytes_of(body b, std::uint16_t version = protocol_version) {
  return encode(envelope{version, "x", 1, std::move(b)});
}
std::string code_of(const std::vector<std::uint8_t>& b, decode_limits lim = {}) {
  auto r = decode(b.data(), b.size(), lim);
  return r ? "ok" : r.err().code;
}
std::string message_of(const std::vector<std::uint8_t>& b) {
  auto r = decode(b.data(), b.size());
  return r ? "" : r.err().message;
}
}  // namespace

TEST_CASE("malformed envelopes are rejected, each with its own error", "[unit][wire]") {
  const auto good = bytes_of(good_join());
  REQUIRE(code_of(good) == "ok");

  SECTION("empty") { CHECK(code_of({}) == "empty"); }
  SECTION("truncated anywhere") {
    for (std::size_t n = 1; n < good.size(); ++n) {
      std::vector<std::uint8_t> cut(good.begin(), good.begin() + n);
      INFO(n);
      const auto c = code_of(cut);
      CHECK((c == "truncated" || c == "malformed"));
    }
    std::vector<std::uint8_t> half(good.begin(), good.begin() + good.size() / 2 / 8 * 8);
    CHECK(code_of(half) == "truncated");
  }
  SECTION("over the size limit") {
    decode_limits lim;
    lim.max_bytes = 16;
    CHECK(code_of(good, lim) == "too_large");
  }
  SECTION("wrong protocol version") {
    const auto v = bytes_of(good_join(), protocol_version + 1);
    CHECK(code_of(v) == "version");
    CHECK(message_of(v).find("protocol version") != std::string::npos);
  }
  SECTION("oversized list") {
    peers_msg m;
    m.peers.push_back({"a", "tcp://127.0.0.1:1", "", {}});
    for (int i = 0; i < 100; ++i) m.peers[0].devices.push_back(100 + i);
    decode_limits lim;
    lim.max_list = 50;
    CHECK(code_of(bytes_of(m), lim) == "too_large");
    CHECK(message_of(bytes_of(m)).empty());  // within the default limit
  }
  SECTION("traversal limit") {
    decode_limits lim;
    lim.traversal_words = 4;
    CHECK(code_of(good, lim) == "malformed");
  }
  SECTION("device specs that make no sense") {
    planner::device_spec d;
    d.speed = -1;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, ""})).find("join.devices[0].speed") != std::string::npos);
    d.speed = 1;
    d.memory_bytes = 0;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, ""})).find("memoryBytes") != std::string::npos);
    CHECK(code_of(bytes_of(join_msg{"", {d}, ""})) == "bad_field");
    // A node that describes itself asks for any free device (-1), as often as it has devices;
    // a named id may come once.
    d.memory_bytes = 1e9;
    d.id = -1;
    CHECK(message_of(bytes_of(join_msg{"n", {d, d}, ""})).empty());
    d.id = 3;
    CHECK(message_of(bytes_of(join_msg{"n", {d, d}, ""})).find("repeats id 3") != std::string::npos);
    d.id = -2;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, ""})).find("join.devices[0].id must be a device id or -1") != std::string::npos);
  }
  SECTION("a membership list that names a device twice, a node twice, or no data address") {
    peers_msg m;
    m.peers.push_back({"a", "tcp://127.0.0.1:1", "", {0, 1}});
    m.peers.push_back({"b", "tcp://127.0.0.1:2", "", {1}});
    CHECK(message_of(bytes_of(m)).find("repeats device 1") != std::string::npos);
    m.peers[1] = {"a", "tcp://127.0.0.1:2", "", {2}};
    CHECK(message_of(bytes_of(m)).find("repeats node 'a'") != std::string::npos);
    m.peers[1] = {"b", "ipc:///tmp/x", "", {2}};
    CHECK(message_of(bytes_of(m)).find("peers.peers[1].endpoint") != std::string::npos);
    m.peers[1] = {"b", "tcp://127.0.0.1:2", "short", {2}};
    CHECK(message_of(bytes_of(m)).find("publicKey") != std::string::npos);
    planner::device_spec d;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, "udp://x:1"})).find("join.dataEndpoint") != std::string::npos);
  }
  SECTION("a slow-down by a factor outside (0, 1]") {
    CHECK(message_of(bytes_of(fault_command{fault_kind::slow, 1, 3.0, 0, -1})).find("fault.factor") != std::string::npos);
  }
  SECTION("a pause or partition without a duration, or for ever") {
    CHECK(message_of(bytes_of(fault_command{fault_kind::pause, 1, 1, 0, -1, 0})).find("fault.durationS") != std::string::npos);
    CHECK(message_of(bytes_of(fault_command{fault_kind::partition, 1, 1, 0, -1, 1e9})).find("fault.durationS") != std::string::npos);
  }
  SECTION("a welcome's non-finite rate") {
    welcome_msg w;
    w.lr = std::nan("");
    CHECK(message_of(bytes_of(w)).find("welcome.lr") != std::string::npos);
  }
}

TEST_CASE("random bytes and bit flips never crash the decoder", "[unit][wire]") {
  rng r(99);
  const auto good = bytes_of(good_join());
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::uint8_t> b;
    if (i % 2) {
      b.resize(8 * (1 + r.below(40)));
      for (auto& x : b) x = static_cast<std::uint8_t>(r.below(256));
    } else {
      b = good;
      for (int k = 0; k < 3; ++k) b[r.below(b.size())] ^= static_cast<std::uint8_t>(1u << r.below(8));
    }
    auto res = decode(b.data(), b.size());
    if (!res) {
      ++rejected;
      CHECK_FALSE(res.err().message.empty());
    } else {
      CHECK(validate_body(res->msg));  // whatever passes is valid
    }
  }
  CHECK(rejected > 1500);  // all random-byte inputs at least
}
