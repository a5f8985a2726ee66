// The controller actor is a relay: fed the same joins, reports and slots over messages, it
// decides exactly what control::controller decides when called directly with the settings a
// job's control_settings mean (speeds unknown until joins, slots and hysteresis lifetime in steps).
#include <catch2/catch.hpp>

#include "actors/controller_actor.hpp"
#include "actors/messages.hpp"

using namespace dynapar;

TEST_CASE("the controller actor decides what the controller state machine decides", "[actor]") {
  training::control_settings cfg;
  cfg.policy = "dp_balanced";
  for (int l = 0; l < 4; ++l) cfg.core.profile.layers.push_back({"l", 1e-3, 2e-3, 0, 1e3, 1e5, 1e3});
  for (int i = 0; i < 3; ++i) {
    planner::device_spec d;
    d.id = i;
    d.speed = 7;  // configured speeds are never read: joins announce them
    d.price_per_s = 1;
    cfg.core.cluster.devices.push_back(d);
  }
  cfg.core.planner.batch = 64;
  cfg.core.budget.cost_per_slot = 2;
  cfg.replan_every = 5;
  cfg.core.hysteresis = true;
  cfg.plan_lifetime_slots = 2;

  control::controller_config direct_cfg;
  direct_cfg.profile = cfg.core.profile;
  direct_cfg.cluster = cfg.core.cluster;
  for (auto& d : direct_cfg.cluster.devices) {
    d.speed = 1;
    d.available = false;
  }
  direct_cfg.planner = cfg.core.planner;
  direct_cfg.planner.plan_steps = 10;
  direct_cfg.budget = cfg.core.budget;
  direct_cfg.hysteresis = true;
  control::controller direct(direct_cfg, std::move(*planner::make_policy("dp_balanced")));

  caf::actor_system_config sc;
  caf::actor_system sys{sc};
  caf::scoped_actor self{sys};
  auto actor = actors::spawn_controller(sys, cfg);
  auto ask = [&](std::int64_t slot) {
    control::decision got;
    self->request(actor, std::chrono::seconds(10), actors::plan_atom::value, slot)
        .receive([&](control::decision& d) { got = std::move(d); }, [&](caf::error& e) { FAIL(to_string(e)); });
    return got;
  };
  auto same = [](const control::decision& a, const control::decision& b) {
    CHECK(a.plan.groups == b.plan.groups);
    CHECK(a.predicted_s == b.predicted_s);
    CHECK(a.queue == b.queue);
    CHECK(a.reason == b.reason);
    CHECK(a.kept_plans == b.kept_plans);
  };
  for (auto [id, speed] : {std::pair{0, 1.0}, std::pair{1, 2.0}}) {
    self->send(actor, actors::join_atom::value, id, speed, 0.0, -1);
    direct.join(id, speed);
  }
  auto want = direct.decide(0);
  REQUIRE(want);
  const auto first = ask(0);
  same(first, *want);
  REQUIRE(first.plan.groups.size() == 2);
  // A measured step: device 1 ran at 3, device 0 at 1, at a cost over the budget.
  control::measurement m;
  m.time_s = 0.1;
  m.cost = 3;
  m.energy_j = {{0, 5.0}};
  std::vector<std::pair<int, double>> compute;
  for (const auto& g : first.plan.groups)
    compute.emplace_back(g.devices[0], g.share * 4 * 3e-3 / (g.devices[0] == 1 ? 3.0 : 1.0));
  m.stages = control::stages_of(first.plan, compute);
  self->send(actor, actors::report_atom::value, m);
  direct.observe(m);
  // Device 2 joins with 2 GB, as its node described it (the decision's reason says so).
  self->send(actor, actors::join_atom::value, 2, 1.0, 2e9, -1);
  direct.join(2, 1.0, 2e9);
  want = direct.decide(1);
  REQUIRE(want);
  const auto second = ask(1);
  same(second, *want);
  CHECK(second.queue > 0);  // the report's cost reached the queue
  CHECK(second.plan.groups.size() == 3);
}
