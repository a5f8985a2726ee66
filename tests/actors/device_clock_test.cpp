// The emulated device's clock: profile timing decoded as sent, speeds clamped, and work
// stretched to at least its emulated length.
#include <catch2/catch.hpp>

#include <thread>

#include "actors/device_clock.hpp"

using namespace dynapar;
using dynapar::actors::device_clock;

TEST_CASE("profile timing arrives as sent and prices a stage's work", "[unit][device]") {
  planner::model_profile p;
  p.layers.push_back({"a", 1e-3, 2e-3, 4e-3, 0, 0, 0, 0.5});
  p.layers.push_back({"b", 10e-3, 20e-3, 40e-3, 0, 0, 0, 0.25});
  device_clock c(1);
  CHECK_FALSE(c.profile_timed());
  CHECK(c.reference_s(0, 2, true, 8) == -1);
  c.set_timing(actors::device_timing(p));
  REQUIRE(c.profile_timed());
  // forward of 8 rows over both layers: 8 x (1 + 10) ms + half of (4 + 40) ms fixed
  CHECK(c.reference_s(0, 2, true, 8) == Approx(8 * 11e-3 + 22e-3));
  CHECK(c.reference_s(1, 2, false, 2) == Approx(2 * 20e-3 + 20e-3));
  CHECK(c.update_s(1) == 0.25);
  CHECK(c.update_s(2) == -1);
  c.set_timing({1, 2, 3});  // not 4 numbers a layer: refused, back to CPU-timed
  CHECK_FALSE(c.profile_timed());
}

TEST_CASE("speeds are clamped to what the machine can emulate", "[unit][device]") {
  device_clock c(5);
  CHECK(c.speed() == 1);
  c.set_speed(0);
  CHECK(c.speed() == 1e-3);
  c.set_speed(0.25);
  CHECK(c.speed() == 0.25);
}

TEST_CASE("work lasts at least its reference time over the speed", "[unit][device]") {
  device_clock c(0.5);
  c.new_step();
  const device_clock::work_start w;
  const double took = c.finish(w, 0.02);  // 20 ms of reference work at half speed
  CHECK(took >= 0.04);
}

TEST_CASE("CPU-timed work is stretched by its CPU time, not by waits", "[unit][device]") {
  device_clock c(0.5);
  c.new_step();
  // Busy work: at half speed it lasts at least twice the CPU seconds it took.
  const device_clock::work_start busy;
  volatile double x = 0;
  while (device_clock::thread_cpu_s() - busy.cpu0 < 0.01) x = x + 1;
  const double cpu = device_clock::thread_cpu_s() - busy.cpu0;
  CHECK(c.finish(busy) >= 2 * cpu);
  // Waiting (a sleep: a wait for a core or a message) uses no CPU and is not stretched; a
  // wall-clock dilation would make these 20 ms last 40.
  c.new_step();
  const device_clock::work_start idle;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.finish(idle) < 0.035);
}
