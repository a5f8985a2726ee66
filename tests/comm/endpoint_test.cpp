// Which endpoints a process may bind or reach without keys (comm/packet.hpp).
#include <catch2/catch.hpp>

#include "comm/packet.hpp"

using namespace dynapar::comm;

TEST_CASE("loopback is decided by parsing the address, not by its first characters", "[unit][comm]") {
  for (const char* yes : {"localhost", "127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "[::1]", "0:0:0:0:0:0:0:1"}) {
    INFO(yes);
    CHECK(is_loopback(yes));
  }
  // A DNS name that starts like a loopback address resolves wherever its owner likes.
  for (const char* no : {"127.evil.example", "127.0.0.1.evil.example", "128.0.0.1", "10.0.0.1", "0.0.0.0", "*", "::", "[::2]",
                         "localhost.evil.example", "", "[::1", "::ffff:10.0.0.1"}) {
    INFO(no);
    CHECK_FALSE(is_loopback(no));
  }
}

TEST_CASE("an endpoint beyond loopback needs keys and --allow-remote", "[unit][comm]") {
  CHECK(check_endpoint("tcp://127.0.0.1:5555", false, false));
  CHECK(check_endpoint("tcp://[::1]:5555", false, false));
  const auto evil = check_endpoint("tcp://127.evil.example:5555", false, false);
  REQUIRE_FALSE(evil);
  CHECK_THAT(evil.err().message, Catch::Contains("reachable beyond this machine"));
  CHECK_FALSE(check_endpoint("tcp://10.0.0.1:5555", true, false));  // keys missing
  CHECK_FALSE(check_endpoint("tcp://10.0.0.1:5555", false, true));  // --allow-remote missing
  CHECK(check_endpoint("tcp://10.0.0.1:5555", true, true));
}
