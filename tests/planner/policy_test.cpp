// Every policy by name on one cluster: valid plans, and what each baseline promises.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "planner/evaluate.hpp"
#include "planner/hysteresis.hpp"
#include "planner/policy.hpp"
#include "planner/time_model.hpp"

using namespace dynapar;
using namespace dynapar::planner;

namespace {
struct fixture {
  model_profile m;
  cluster_state c;
  planner_config cfg;
  fixture() {
    for (int l = 0; l < 8; ++l) m.layers.push_back({"l", 1e-3, 2e-3, 1e-4, 1e5, 2e6, 1e5});
    const double speeds[] = {4, 2, 1, 1};
    for (int i = 0; i < 4; ++i) {
      device_spec d;
      d.id = 10 + i;
      d.speed = speeds[i];
      d.node = i / 2;
      c.devices.push_back(d);
    }
    cfg.batch = 60;
  }
};
}  // namespace

TEST_CASE("every policy builds by name and returns a valid plan", "[unit][planner]") {
  fixture f;
  problem p(f.m, f.c, f.cfg);
  for (const auto& name : policy_names()) {
    INFO(name);
    auto pol = make_policy(name);
    REQUIRE(pol);
    CHECK((*pol)->name() == name);
    auto pl = (*pol)->decide({p, nullptr, {}, 0});
    REQUIRE(pl);
    CHECK(validate(*pl, 8, 60, {10, 11, 12, 13}));
    CHECK(evaluate(p, *pl, nullptr, {}));
  }
}

TEST_CASE("an unknown policy name is an error listing the known ones", "[unit][planner]") {
  auto pol = make_policy("fastest");
  REQUIRE_FALSE(pol);
  CHECK(pol.err().message.find("joint_lyapunov") != std::string::npos);
}

TEST_CASE("baselines keep their definitions", "[unit][planner]") {
  fixture f;
  problem p(f.m, f.c, f.cfg);
  auto even = (*make_policy("dp_even"))->decide({p, nullptr, {}, 0});
  REQUIRE(even->groups.size() == 4);
  for (const auto& g : even->groups) CHECK(g.share == 15);
  auto bal = (*make_policy("dp_balanced"))->decide({p, nullptr, {}, 0});
  REQUIRE(bal->groups.size() == 4);
  CHECK(bal->groups[0].share > bal->groups[3].share);  // the 4x device takes more
  // dp_dispatch: dp_balanced's plan, and the within-step dispatch the baselines do without.
  auto dd = *make_policy("dp_dispatch");
  CHECK(dd->decide({p, nullptr, {}, 0})->groups == bal->groups);
  CHECK(dd->dispatches());
  CHECK_FALSE((*make_policy("dp_balanced"))->dispatches());
  CHECK((*make_policy("joint_lyapunov"))->dispatches());
  auto pe = (*make_policy("pipeline_even"))->decide({p, nullptr, {}, 0});
  REQUIRE(pe->groups.size() == 1);
  CHECK(pe->groups[0].splits == std::vector<int>{0, 2, 4, 6, 8});
  auto pb = (*make_policy("pipeline_balanced"))->decide({p, nullptr, {}, 0});
  REQUIRE(pb->groups.size() == 1);
  CHECK(pb->groups[0].splits[1] > 2);  // the fastest first device takes more layers
  // HetPipe: a virtual worker per node (devices 10, 11 on node 0; 12, 13 on node 1), each a
  // pipeline over its devices with a speed-aware split, equal shares, although every device
  // could hold the model alone (so it is not dp_even).
  auto hp = (*make_policy("hetpipe_static"))->decide({p, nullptr, {}, 0});
  REQUIRE(hp->groups.size() == 2);
  CHECK(hp->groups[0].devices == std::vector<int>{10, 11});
  CHECK(hp->groups[1].devices == std::vector<int>{12, 13});
  CHECK(hp->groups[0].share == 30);
  CHECK(hp->groups[1].share == 30);
  CHECK(hp->groups[0].splits[1] > 4);  // the 4x device takes more layers than the 2x one
  CHECK(hp->groups[1].splits[1] == 4);  // equal devices split evenly
}

TEST_CASE("static policies keep their plan until one of its devices disappears", "[unit][planner]") {
  fixture f;
  for (const std::string name : {"hetpipe_static", "joint_static"}) {
    INFO(name);
    auto pol = std::move(*make_policy(name));
    problem p0(f.m, f.c, f.cfg);
    auto a = pol->decide({p0, nullptr, {}, 0});
    REQUIRE(a);
    auto faster = f.c;
    faster.devices[3].speed = 10;  // a change a static policy must ignore
    problem p1(f.m, faster, f.cfg);
    auto b = pol->decide({p1, &*a, {}, 1});
    REQUIRE(b);
    CHECK(b->groups == a->groups);
    auto gone = f.c;
    const int used = a->groups[0].devices[0];
    for (auto& d : gone.devices) d.available = d.id != used;
    problem p2(f.m, gone, f.cfg);
    auto c = pol->decide({p2, &*b, {}, 2});
    REQUIRE(c);
    for (const auto& g : c->groups) CHECK(std::find(g.devices.begin(), g.devices.end(), used) == g.devices.end());
  }
}

TEST_CASE("the oracle refuses instances too large to enumerate", "[unit][planner]") {
  fixture f;
  for (int i = 0; i < 6; ++i) {
    device_spec d;
    d.id = 100 + i;
    f.c.devices.push_back(d);
  }
  problem p(f.m, f.c, f.cfg);
  auto pl = (*make_policy("oracle"))->decide({p, nullptr, {}, 0});
  REQUIRE_FALSE(pl);
  CHECK(pl.err().code == "too_large");
}

TEST_CASE("hysteresis: a new plan must gain more than the noise plus its migration over its lifetime", "[unit][planner]") {
  fixture f;
  problem p(f.m, f.c, f.cfg);
  const auto even = *(*make_policy("dp_even"))->decide({p, nullptr, {}, 0});
  const auto bal = *(*make_policy("dp_balanced"))->decide({p, nullptr, {}, 0});
  // Data parallel to data parallel on the same devices moves nothing: the noise does not
  // count, only the re-plan margin.
  const double t_even = evaluate(p, even, &even, {})->batch_time_s, t_bal = evaluate(p, bal, &even, {})->batch_time_s;
  REQUIRE(evaluate(p, bal, &even, {})->migration_s == 0);
  const double gain = (t_even - t_bal) / t_even;  // no budget: the score is V T / T_floor
  REQUIRE(gain > 0.1);
  auto c = check_switch(p, even, bal, {}, 20, 1.5 * gain);
  CHECK_FALSE(c.keep);
  CHECK(c.gain == Approx(gain));
  auto margined = f.cfg;
  margined.replan_margin = 1.5 * gain;
  c = check_switch(problem(f.m, f.c, margined), even, bal, {}, 20, 0);
  CHECK(c.keep);
  CHECK(c.why.find("kept the plan") != std::string::npos);
  // From one pipeline to data parallelism every device takes the layers it lacks (made
  // heavy here, their sums after backward): over a short life the migration outweighs the
  // gain, over a long one not.
  for (auto& l : f.m.layers) l.param_bytes *= 5;
  auto after = f.cfg;
  after.overlap_sums = false;
  const problem h(f.m, f.c, after);
  const auto pipe = *(*make_policy("pipeline_balanced"))->decide({h, nullptr, {}, 0});
  const auto bal_h = *(*make_policy("dp_balanced"))->decide({h, nullptr, {}, 0});
  const auto now = evaluate(h, pipe, &pipe, {}), next = evaluate(h, bal_h, &pipe, {});
  REQUIRE(next->migration_s > 0);
  const double steady = next->batch_time_s - next->migration_s;
  const double g = (now->batch_time_s - steady) / now->batch_time_s;
  REQUIRE(g > 0);
  const double lifetime_even = next->migration_s / (g * now->batch_time_s);  // where gain = migration share
  REQUIRE(lifetime_even > 4);
  c = check_switch(h, pipe, bal_h, {}, 0.5 * lifetime_even, 0);
  CHECK(c.keep);
  CHECK(c.threshold == Approx(next->migration_s / (0.5 * lifetime_even * now->batch_time_s)));
  CHECK_FALSE(check_switch(h, pipe, bal_h, {}, 2 * lifetime_even, 0).keep);
  // A current plan on a device that is gone never holds.
  auto gone = f.c;
  gone.devices[0].available = false;
  problem q(f.m, gone, f.cfg);
  const auto three = *(*make_policy("dp_balanced"))->decide({q, nullptr, {}, 0});
  CHECK_FALSE(check_switch(q, even, three, {}, 1e9, 10).keep);
}

TEST_CASE("joint_lyapunov takes a joining device when its migration pays off over the slot, not within one step", "[unit][planner]") {
  // Two equal devices; 4 layers of 3 ms a sample (fwd + bwd) and 100 MB each, over a 1 GB/s
  // link. Device 0 alone: 32 samples x 4 layers x 3 ms = 384 ms a step. Both as a pipeline of
  // two stages (1F1B, 4 micro-batches of 8): (4 + 1) x 48 ms = 240 ms, once device 1 has
  // received its 2 layers, 200 MB in 200 ms. Data parallel would sum 400 MB of gradients a
  // step, slower than device 0 alone.
  model_profile m;
  for (int l = 0; l < 4; ++l) m.layers.push_back({"l", 1e-3, 2e-3, 0, 1e3, 100e6, 1e3});
  m.optimizer_state_factor = 0;
  cluster_state c;
  for (int i = 0; i < 2; ++i) {
    device_spec d;
    d.id = i;
    d.node = 0;
    c.devices.push_back(d);
  }
  c.tiers.same_node = {1e9, 0};
  plan alone;
  alone.groups.push_back({{0}, {0, 4}, 32, 8});
  const auto devices_used = [&](int plan_steps) {
    planner_config cfg;
    cfg.batch = 32;
    cfg.micro_batch = 8;
    cfg.plan_steps = plan_steps;
    problem p(m, c, cfg);
    auto pol = make_policy("joint_lyapunov");
    REQUIRE(pol);
    auto d = (*pol)->decide({p, &alone, {}, 1});
    REQUIRE(d);
    std::size_t n = 0;
    for (const auto& g : d->groups) n += g.devices.size();
    return n;
  };
  // A plan of one step: 240 + 200 ms > 384 ms, device 0 stays alone. A plan of 10 steps:
  // 240 + 20 ms a step on average < 384 ms, device 1 joins.
  CHECK(devices_used(1) == 1);
  CHECK(devices_used(10) == 2);
}

TEST_CASE("hysteresis: the gain is a step's once the new plan is in place, whatever its expected life", "[unit][planner]") {
  // Scored by its mean step, a plan's migration counts 1 / plan_steps; the gain the
  // hysteresis weighs must leave it out all the same (the threshold has it, over the life).
  fixture f;
  for (auto& l : f.m.layers) l.param_bytes *= 5;
  for (int plan_steps : {1, 10}) {
    f.cfg.plan_steps = plan_steps;
    const problem h(f.m, f.c, f.cfg);
    const auto pipe = *(*make_policy("pipeline_balanced"))->decide({h, nullptr, {}, 0});
    const auto bal = *(*make_policy("dp_balanced"))->decide({h, nullptr, {}, 0});
    const auto now = evaluate(h, pipe, &pipe, {}), next = evaluate(h, bal, &pipe, {});
    REQUIRE(next->migration_s > 0.01 * next->batch_time_s);
    const double in_place = next->batch_time_s - next->migration_s;  // no budget: the score is V T / T_floor
    CHECK(check_switch(h, pipe, bal, {}, 20, 0).gain == Approx((now->batch_time_s - in_place) / now->batch_time_s));
  }
}

TEST_CASE("layout_keeping re-solves the shares of the current groups and moves no layer", "[unit][planner]") {
  fixture f;
  const problem p(f.m, f.c, f.cfg);
  const auto even = *(*make_policy("dp_even"))->decide({p, nullptr, {}, 0});
  REQUIRE(even.groups.size() == 4);
  const auto kept = layout_keeping(p, even);
  REQUIRE(kept);
  CHECK(diff(&even, *kept).empty());
  std::vector<group_shape> shapes;
  for (const auto& g : even.groups) shapes.push_back(make_shape(p, {p.links.index_of(g.devices[0])}, g.splits, g.micro_batch));
  const auto makespan = [&](const std::vector<int>& b) {
    double t = 0;
    for (std::size_t g = 0; g < b.size(); ++g) t = std::max(t, group_time(p, shapes[g], b[g]));
    return t;
  };
  // Brute force: every split of the batch of 60 into four shares of at least one.
  double best = unlimited;
  for (int a = 1; a < 60; ++a)
    for (int b = 1; a + b < 60; ++b)
      for (int c = 1; a + b + c < 60; ++c) best = std::min(best, makespan({a, b, c, 60 - a - b - c}));
  std::vector<int> got;
  for (const auto& g : kept->groups) got.push_back(g.share);
  CHECK(std::accumulate(got.begin(), got.end(), 0) == 60);
  CHECK(*std::min_element(got.begin(), got.end()) >= 1);
  CHECK(makespan(got) == Approx(best));
  CHECK(makespan(got) < makespan({15, 15, 15, 15}));
  // A group on a device that is gone cannot be kept.
  auto gone = f.c;
  gone.devices[3].available = false;
  CHECK_FALSE(layout_keeping(problem(f.m, gone, f.cfg), even));
}

TEST_CASE("hysteresis: a plan that moves layers must beat the current layout re-shared by as much", "[unit][planner]") {
  fixture f;
  const problem p(f.m, f.c, f.cfg);
  // Devices 10 and 11 (speeds 4 and 2) at even shares; the proposal adds devices 12 and 13,
  // which must receive every layer.
  plan two;
  two.groups.push_back({{10}, {0, 8}, 30, 1});
  two.groups.push_back({{11}, {0, 8}, 30, 1});
  const auto all = *(*make_policy("dp_balanced"))->decide({p, nullptr, {}, 0});
  REQUIRE_FALSE(diff(&two, all).moves.empty());
  const auto stay = layout_keeping(p, two);
  REQUIRE(stay);
  const double now = evaluate(p, two, &two, {})->score, kept = evaluate(p, *stay, &two, {})->score;
  const double in_place = evaluate(p, all, &all, {})->score;
  const double gain = (now - in_place) / now, over_kept = (kept - in_place) / kept;
  REQUIRE(over_kept > 0.05);
  REQUIRE(gain > over_kept + 0.05);
  const double life = 1e9;  // migration spread to nothing: the noise alone decides
  // The gain over the re-shared layout clears the noise: the layers move.
  auto c = check_switch(p, two, all, {}, life, 0.5 * over_kept);
  CHECK_FALSE(c.keep);
  CHECK_FALSE(c.instead);
  // It does not (while the gain over the current plan does): the layout stays, re-shared.
  c = check_switch(p, two, all, {}, life, 0.5 * (over_kept + gain));
  CHECK_FALSE(c.keep);
  REQUIRE(c.instead);
  CHECK(c.instead->groups == stay->groups);
  CHECK(c.why.find("kept the layers in place") != std::string::npos);
  // Above the gain over the current plan as well: still re-shared (new shares move nothing).
  c = check_switch(p, two, all, {}, life, 1.1 * gain);
  REQUIRE(c.instead);
  CHECK(c.instead->groups == stay->groups);
  // From the re-shared layout, whose shares are already the best: the plan is kept.
  const double from_stay = (kept - in_place) / kept;
  c = check_switch(p, *stay, all, {}, life, 1.1 * from_stay);
  CHECK(c.keep);
  CHECK_FALSE(c.instead);
  CHECK(c.why.find("kept the plan") != std::string::npos);
}
