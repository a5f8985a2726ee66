// The emulated link against hand-computed FIFO timings.
#include <catch2/catch.hpp>

#include "comm/link_shaper.hpp"

using namespace dynapar::comm;

TEST_CASE("a link delivers after latency plus bytes over bandwidth, one transfer at a time") {
  const link_spec l{1e6, 0.001};  // 1 MB/s, 1 ms
  link_shaper s;
  // 2000 bytes: 1 ms + 2 ms.
  CHECK(s.offer(l, 10.0, 2000) == Approx(10.003));
  // Offered while the first is on the link: waits for it, then 1 ms + 1 ms.
  CHECK(s.offer(l, 10.001, 1000) == Approx(10.005));
  // Offered after the link went idle: starts at once.
  CHECK(s.offer(l, 20.0, 0) == Approx(20.001));
  CHECK(s.busy_s() == Approx(0.003 + 0.002 + 0.001));
  CHECK(s.bytes() == 3000);
  CHECK(s.transfers() == 3);
  s.reset_counters();
  CHECK(s.transfers() == 0);
  CHECK(s.busy_s() == 0);
}

TEST_CASE("an unlimited link costs only its latency") {
  link_shaper s;
  CHECK(s.offer(link_spec{}, 5.0, 1e12) == 5.0);
  CHECK(transfer_s(link_spec{std::numeric_limits<double>::infinity(), 2e-6}, 1e9) == Approx(2e-6));
}
