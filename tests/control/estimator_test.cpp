// The speed estimator against speeds written down by hand: each step's measured speed is
// work / compute seconds with work from the profile (3 ms a sample a layer here), and the
// smoothed estimate follows the exponential average of them, except that a level shift which
// lasts is taken at once.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "control/estimator.hpp"

using namespace dynapar;
using namespace dynapar::control;

namespace {

struct one_device {
  planner::model_profile profile;
  planner::cluster_state cluster;
  one_device() {
    for (int l = 0; l < 4; ++l) profile.layers.push_back({"l", 1e-3, 2e-3, 0, 1e3, 1e5, 1e3});
    planner::device_spec d;
    d.id = 7;
    d.speed = 1;
    cluster.devices.push_back(d);
  }
  // One step of 10 samples over the 4 layers at true speed `speed`.
  measurement step(double speed) const {
    measurement m;
    m.stages.push_back({7, 0, 4, 10 * 4 * 3e-3 / speed, 10, 0});
    return m;
  }
};

// The plain exponential average, by hand, for comparison.
double smoothed(double start, const std::vector<double>& seen, double alpha) {
  double s = start;
  for (double x : seen) s = (1 - alpha) * s + alpha * x;
  return s;
}

}  // namespace

TEST_CASE("a device that slows for good is estimated at its new speed within three steps", "[unit][control]") {
  const one_device w;
  const planner::problem p(w.profile, w.cluster, {}, {});
  estimator e(w.cluster, w.profile, 0.1);
  for (int k = 0; k < 10; ++k) e.observe(w.step(1.0), p);
  CHECK(e.snapshot().speeds[0] == Approx(1.0));
  // A quarter of the speed from now on. With smoothing 0.1 alone the estimate would still be
  // above 0.78 after 3 steps and above 0.3 after 15.
  for (int k = 0; k < 3; ++k) e.observe(w.step(0.25), p);
  const double after3 = e.snapshot().speeds[0];
  CHECK(smoothed(1.0, {0.25, 0.25, 0.25}, 0.1) > 0.78);
  // The fast average (weight 0.5) after 3 steps: 1 - 0.75 x (1 - 0.5^3) = 0.34375.
  CHECK(after3 == Approx(0.34375));
  // Then the smoothing goes on from there: 0.25 + 0.09375 x 0.9^5 after 5 more steps,
  // where the plain average would still be at 0.25 + 0.75 x 0.9^8 = 0.57.
  for (int k = 0; k < 5; ++k) e.observe(w.step(0.25), p);
  CHECK(e.snapshot().speeds[0] == Approx(smoothed(0.34375, std::vector<double>(5, 0.25), 0.1)));
  CHECK(e.snapshot().speeds[0] < 0.31);
}

TEST_CASE("noise and a short burst move the estimate only by the smoothing", "[unit][control]") {
  const one_device w;
  const planner::problem p(w.profile, w.cluster, {}, {});
  estimator e(w.cluster, w.profile, 0.1);
  // +-10 % alternating, then a 2-step burst at half speed, then back to 1.
  std::vector<double> seen;
  for (int k = 0; k < 12; ++k) seen.push_back(k % 2 ? 0.9 : 1.1);
  seen.push_back(0.5);
  seen.push_back(0.5);
  for (int k = 0; k < 4; ++k) seen.push_back(1.0);
  for (double s : seen) e.observe(w.step(s), p);
  CHECK(e.snapshot().speeds[0] == Approx(smoothed(1.0, seen, 0.1)));
}

TEST_CASE("a shift is counted on one side only: alternating swings past the threshold never add up", "[unit][control]") {
  const one_device w;
  const planner::problem p(w.profile, w.cluster, {}, {});
  estimator e(w.cluster, w.profile, 0.1);
  // Swings of +-80 % a step: the fast average settles at 1.27 and 0.73, more than 25 % off
  // the smoothed one on alternate sides, so no side is held for 3 steps.
  std::vector<double> seen;
  for (int k = 0; k < 20; ++k) seen.push_back(k % 2 ? 0.2 : 1.8);
  for (double s : seen) e.observe(w.step(s), p);
  CHECK(e.snapshot().speeds[0] == Approx(smoothed(1.0, seen, 0.1)));
}

TEST_CASE("a device no slot measures returns half-way (in log ratio) to its announced speed every 4 slots", "[unit][control]") {
  const one_device w;
  const planner::problem p(w.profile, w.cluster, {}, {});
  estimator e(w.cluster, w.profile, 0.1);
  for (int k = 0; k < 3; ++k) e.observe(w.step(0.25), p);  // the level shift: 0.34375 (above)
  e.end_slot();  // measured in this slot: unchanged
  REQUIRE(e.snapshot().speeds[0] == Approx(0.34375));
  for (int k = 0; k < 4; ++k) e.end_slot();
  CHECK(e.snapshot().speeds[0] == Approx(std::sqrt(0.34375)));  // 1 x (0.34375 / 1)^(1/2)
  for (int k = 0; k < 4; ++k) e.end_slot();
  CHECK(e.snapshot().speeds[0] == Approx(std::pow(0.34375, 0.25)));
  // Measured again: the guess is replaced by the measurement, then smoothing goes on.
  e.observe(w.step(0.5), p);
  CHECK(e.snapshot().speeds[0] == Approx(0.5));
  e.observe(w.step(0.6), p);
  CHECK(e.snapshot().speeds[0] == Approx(0.9 * 0.5 + 0.1 * 0.6));
  // A device that announced its speed on joining relaxes toward that one.
  e.announce(7, 2.0);
  for (int k = 0; k < 3; ++k) e.observe(w.step(0.5), p);
  e.end_slot();
  const double slow = e.snapshot().speeds[0];
  REQUIRE(slow < 1.0);
  for (int k = 0; k < 4; ++k) e.end_slot();
  CHECK(e.snapshot().speeds[0] == Approx(2.0 * std::sqrt(slow / 2.0)));
}
