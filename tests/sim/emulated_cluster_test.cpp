// What the driver takes as the truth of an emulated cluster, against the scenario's own
// numbers worked out by hand.
#include <catch2/catch.hpp>

#include "sim/emulated_cluster.hpp"

using namespace dynapar;
using namespace dynapar::sim;

namespace {
// Devices 0 and 1 on node 0, device 2 on node 1; 10 MB of parameters in one layer.
scenario three_devices() {
  scenario s;
  s.model.layers.push_back({"fc", 1e-3, 2e-3, 0, 1e3, 10e6, 1e3});
  const double speeds[] = {1, 0.5, 0.25};
  for (int i = 0; i < 3; ++i) {
    planner::device_spec d;
    d.id = i;
    d.speed = speeds[i];
    d.price_per_s = 1 + i;
    d.power_w = 100 * (i + 1);
    d.node = i < 2 ? 0 : 1;
    s.cluster.devices.push_back(d);
  }
  s.cluster.tiers.same_node = {1e9, 1e-5};
  s.cluster.tiers.same_rack = {1e8, 1e-4};
  s.events.push_back({2, event_kind::leave, 1});
  s.slots = 4;
  return s;
}

planner::plan two_groups(int a, int b) {
  planner::plan p;
  p.groups.push_back({{a}, {0, 1}, 32, 32});
  p.groups.push_back({{b}, {0, 1}, 32, 32});
  return p;
}
}  // namespace

TEST_CASE("the emulated truth follows the world slot by slot", "[unit][sim]") {
  emulated_cluster c(three_devices());
  c.enter_slot(0);
  CHECK(c.truth().devices[1].available);
  c.enter_slot(1);
  c.enter_slot(2);
  CHECK_FALSE(c.truth().devices[1].available);  // its leave event
  CHECK(c.index_of(2) == 2);
  CHECK(c.index_of(7) == -1);
  CHECK(c.power_w(2) == 300);
  CHECK(c.power_w(7) == 0);
  CHECK(c.price_per_s(0) + c.price_per_s(2) == 1 + 3);
  CHECK(c.price_per_s(7) == 0);
}

TEST_CASE("links come from the tiers of the devices' nodes", "[unit][sim]") {
  emulated_cluster c(three_devices());
  c.enter_slot(0);
  CHECK(c.link(0, 1) == std::make_pair(1e9, 1e-5));
  CHECK(c.link(0, 2) == std::make_pair(1e8, 1e-4));
  CHECK(c.link(0, 9).second == 0);  // unknown: an unshaped link
}

TEST_CASE("injected slow-downs multiply the world's speed until they end", "[unit][sim]") {
  emulated_cluster c(three_devices());
  c.enter_slot(0);
  CHECK(c.true_speed(1) == 0.5);
  c.slow_down(1, 0.5, 10);
  c.slow_down(2, 1e-6, 12);
  CHECK(c.true_speed(1) == 0.25);
  CHECK(c.true_speed(2) == 1e-3);  // clamped: the emulation's slowest
  CHECK(c.slow_downs_over(9).empty());
  CHECK(c.slow_downs_over(10) == std::vector<int>{1});
  CHECK(c.true_speed(1) == 0.5);
  c.forget(2);
  CHECK(c.true_speed(2) == 0.25);
  CHECK(c.slow_downs_over(100).empty());
}

TEST_CASE("the emulated sums take the ring time of the true links", "[unit][sim]") {
  emulated_cluster c(three_devices());
  c.enter_slot(0);
  const auto m = three_devices().model;
  auto sync_s = [&](const planner::plan& p) { return planner::sums_end(c.sums(m, 64, p), {}); };
  planner::plan one;
  one.groups.push_back({{0}, {0, 1}, 64, 64});
  CHECK(sync_s(one) == 0);
  // Two holders of 10 MB: a ring of two moves 2 (2 - 1) / 2 = 1 layer each way and pays
  // 2 (2 - 1) latencies, on the slowest link of the ring.
  CHECK(sync_s(two_groups(0, 1)) == Approx(10e6 / 1e9 + 2 * 1e-5));
  CHECK(sync_s(two_groups(0, 2)) == Approx(10e6 / 1e8 + 2 * 1e-4));
  CHECK(sync_s(two_groups(0, 9)) == 0);  // a device it does not know
}
