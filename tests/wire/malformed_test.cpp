// A table of malformed inputs, each rejected with its own error; none crashes.
#include <catch2/catch.hpp>

#include <cstring>

#include "common/rng.hpp"
#include "wire/codec.hpp"

using namespace dynapar;
using namespace dynapar::wire;

namespace {
plan_msg good_plan() {
  plan_msg m;
  m.num_layers = 10;
  m.batch = 64;
  m.plan.groups.push_back({{1, 2}, {0, 5, 10}, 40, 8});
  m.plan.groups.push_back({{3}, {0, 10}, 24, 8});
  return m;
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
  const auto good = bytes_of(good_plan());
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
    const auto v = bytes_of(good_plan(), protocol_version + 1);
    CHECK(code_of(v) == "version");
    CHECK(message_of(v).find("protocol version") != std::string::npos);
  }
  SECTION("oversized list") {
    auto m = good_plan();
    for (int i = 0; i < 100; ++i) m.plan.groups[0].devices.push_back(100 + i);
    decode_limits lim;
    lim.max_list = 50;
    CHECK(code_of(bytes_of(m), lim) == "too_large");
  }
  SECTION("traversal limit") {
    decode_limits lim;
    lim.traversal_words = 4;
    CHECK(code_of(good, lim) == "malformed");
  }
  SECTION("splits not increasing") {
    auto m = good_plan();
    m.plan.groups[0].splits = {0, 7, 5, 10};
    m.plan.groups[0].devices = {1, 2, 4};
    CHECK(code_of(bytes_of(m)) == "bad_plan");
    CHECK(message_of(bytes_of(m)).find("plan.groups[0].splits") != std::string::npos);
  }
  SECTION("splits beyond the model") {
    auto m = good_plan();
    m.plan.groups[1].splits = {0, 11};
    CHECK(message_of(bytes_of(m)).find("layer count 10") != std::string::npos);
  }
  SECTION("shares not summing to the batch") {
    auto m = good_plan();
    m.plan.groups[1].share = 23;
    CHECK(code_of(bytes_of(m)) == "bad_plan");
    CHECK(message_of(bytes_of(m)).find("sum to 63") != std::string::npos);
  }
  SECTION("a device in two groups") {
    auto m = good_plan();
    m.plan.groups[1].devices = {2};
    CHECK(message_of(bytes_of(m)).find("repeats device id 2") != std::string::npos);
  }
  SECTION("device specs that make no sense") {
    planner::device_spec d;
    d.speed = -1;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, ""})).find("join.devices[0].speed") != std::string::npos);
    d.speed = 1;
    d.memory_bytes = 0;
    CHECK(message_of(bytes_of(join_msg{"n", {d}, ""})).find("memoryBytes") != std::string::npos);
    CHECK(code_of(bytes_of(join_msg{"", {d}, ""})) == "bad_field");
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
  SECTION("non-finite metrics") {
    CHECK(code_of(bytes_of(metrics_msg{0, 0, std::nan(""), 0, 0, 0, 0})) == "bad_field");
  }
}

TEST_CASE("random bytes and bit flips never crash the decoder", "[unit][wire]") {
  rng r(99);
  const auto good = bytes_of(good_plan());
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
