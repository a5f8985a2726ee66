// The node-loss deadline from the gaps between a node's messages, against hand computations.
#include <catch2/catch.hpp>

#include "control/silence.hpp"

using namespace dynapar;

TEST_CASE("a silent node is lost after a multiple of its largest recent gap, within floor and cap", "[unit][control]") {
  control::silence_config c;  // floor 0.5, cap 10, initial 6, factor 4, window 64, warmup 8
  control::silence_detector d(c, 0);
  // Before the warm-up: the initial allowance, however often the node talks.
  for (int k = 1; k < 8; ++k) d.heard(0.1 * k);
  CHECK(d.allowed_s() == 6);
  CHECK_FALSE(d.lost(0.7 + 5.99));
  CHECK(d.lost(0.7 + 6.01));
  // Eight gaps of 0.1 s: 4 x 0.1 = 0.4 s, raised to the floor.
  d.heard(0.8);
  CHECK(d.allowed_s() == Approx(0.5));
  CHECK_FALSE(d.lost(0.8 + 0.49));
  CHECK(d.lost(0.8 + 0.51));
  // One gap of 0.3 s: 4 x 0.3 = 1.2 s, for as long as it is among the last 64.
  d.heard(1.1);
  CHECK(d.allowed_s() == Approx(1.2));
  double t = 1.1;
  for (int k = 0; k < 63; ++k) d.heard(t += 0.1);
  CHECK(d.allowed_s() == Approx(1.2));
  d.heard(t += 0.1);  // the 0.3 s gap leaves the window
  CHECK(d.allowed_s() == Approx(0.5));
  // A node that stalled for 5 s once: 20 s, capped at 10.
  d.heard(t += 5);
  CHECK(d.allowed_s() == 10);
  // Messages out of order on the caller's clock never shorten the allowance or move time back.
  const double last = d.last_s();
  d.heard(last - 1);
  CHECK(d.last_s() == last);
  CHECK(d.allowed_s() == 10);
}

TEST_CASE("a node sending a large answer is not lost before the time that answer may take", "[unit][control]") {
  control::silence_detector d({}, 0);
  double t = 0;
  for (int k = 0; k < 8; ++k) d.heard(t += 0.1);  // allowed: the floor, 0.5 s
  d.busy_until(t + 8);                            // asked for a layer copy that may take 8 s
  CHECK_FALSE(d.lost(t + 0.6));
  CHECK_FALSE(d.lost(t + 7.9));
  CHECK(d.lost(t + 8.1));                         // past it, the usual allowance from the last message
  d.busy_until(t + 2);                            // a shorter grace never cuts a longer one
  CHECK_FALSE(d.lost(t + 7.9));
  d.heard(t + 8.05);                              // the answer came: the 8 s gap is now among the gaps
  CHECK_FALSE(d.lost(t + 8.05 + 10));             // 4 x 7.95 s, capped at 10
  CHECK(d.lost(t + 8.05 + 10.1));
}
