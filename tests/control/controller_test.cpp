// The controller state machine shared by the controller actor and the simulator, against
// references written from the definitions: the queue recurrence by hand, speeds from the
// layers' per-sample times, the policy called directly on the same problem.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "control/controller.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"

using namespace dynapar;
using namespace dynapar::control;

namespace {

// 4 layers of 1 ms forward + 2 ms backward a sample; devices 10..13, all speed 1 at first.
controller_config small_config() {
  controller_config c;
  for (int l = 0; l < 4; ++l) c.profile.layers.push_back({"l", 1e-3, 2e-3, 0, 1e3, 1e5, 1e3});
  for (int i = 0; i < 4; ++i) {
    planner::device_spec d;
    d.id = 10 + i;
    d.price_per_s = 1;
    d.power_w = 100;
    c.cluster.devices.push_back(d);
  }
  c.planner.batch = 64;
  c.smoothing = 1;  // each measurement replaces the estimate: exact checks
  return c;
}

std::shared_ptr<planner::policy> policy(const std::string& name) { return std::move(*planner::make_policy(name)); }

// A step in which every device of `p` ran its stage at `speed[id - 10]`: compute seconds from
// the layers' times (3 ms a sample a layer), not from the estimator's formula.
measurement ran(const planner::plan& p, const std::vector<double>& speed, double cost) {
  measurement m;
  m.cost = cost;
  m.time_s = 1;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      stage_measure s;
      s.device = g.devices[j];
      s.first_layer = g.splits[j];
      s.end_layer = g.splits[j + 1];
      s.samples = g.share;
      s.micro_batches = 1;
      s.compute_s = g.share * (s.end_layer - s.first_layer) * 3e-3 / speed[s.device - 10];
      m.stages.push_back(s);
    }
  return m;
}

}  // namespace

TEST_CASE("the first decision is the policy's own on the announced cluster", "[unit][control]") {
  auto cfg = small_config();
  cfg.cluster.devices[3].available = false;
  controller c(cfg, policy("dp_balanced"));
  auto d = c.decide(0);
  REQUIRE(d);
  const planner::problem p(cfg.profile, cfg.cluster, cfg.planner, cfg.budget);
  auto direct = policy("dp_balanced")->decide({p, nullptr, {}, 0});
  REQUIRE(direct);
  CHECK(d->plan.groups == direct->groups);
  for (const auto& g : d->plan.groups) CHECK(std::find(g.devices.begin(), g.devices.end(), 13) == g.devices.end());
  REQUIRE(c.current());
  CHECK(c.current()->groups == d->plan.groups);
  CHECK(d->predicted_s > 0);
}

TEST_CASE("joins, leaves and measured speeds steer the shares", "[unit][control]") {
  auto cfg = small_config();
  for (auto& dev : cfg.cluster.devices) dev.available = false;
  controller c(cfg, policy("dp_balanced"));
  c.join(10, 1);
  c.join(11, 1);
  auto d = c.decide(0);
  REQUIRE(d);
  REQUIRE(d->plan.groups.size() == 2);
  CHECK(d->plan.groups[0].share == 32);
  CHECK(d->reason.find("device 11 joined") != std::string::npos);
  // Device 11 really runs 3x as fast: one measurement (smoothing 1) and the shares follow.
  c.observe(ran(d->plan, {1, 3, 1, 1}, 0));
  const auto learnt = c.snapshot().estimates.speeds;
  CHECK(learnt[0] == Approx(1));
  CHECK(learnt[1] == Approx(3));
  d = c.decide(1);
  REQUIRE(d);
  int share11 = 0;
  for (const auto& g : d->plan.groups)
    if (g.devices == std::vector<int>{11}) share11 = g.share;
  CHECK(share11 == 48);  // 3/4 of 64
  c.leave(11);
  d = c.decide(2);
  REQUIRE(d);
  REQUIRE(d->plan.groups.size() == 1);
  CHECK(d->plan.groups[0].devices == std::vector<int>{10});
}

TEST_CASE("the cost queue follows its recurrence once a slot, on the slot's mean", "[unit][control]") {
  auto cfg = small_config();
  cfg.budget.cost_per_slot = 2;
  controller c(cfg, policy("dp_even"));
  c.observe(ran(planner::plan{}, {1, 1, 1, 1}, 100));  // before any decision: ignored
  CHECK(c.queues().slots == 0);
  auto d = c.decide(0);
  REQUIRE(d);
  c.observe(ran(d->plan, {1, 1, 1, 1}, 3));
  c.observe(ran(d->plan, {1, 1, 1, 1}, 5));
  c.close_slot();
  // Q = max(0 + mean(3, 5) / 2 - 1, 0) = 1
  CHECK(c.queues().cost == Approx(1.0));
  CHECK(c.queues().slots == 1);
  c.close_slot();  // nothing observed since: no update
  CHECK(c.queues().slots == 1);
  c.observe(ran(d->plan, {1, 1, 1, 1}, 1));
  d = c.decide(1);  // closes the slot first: Q = max(1 + 1/2 - 1, 0) = 0.5
  REQUIRE(d);
  CHECK(d->queue == Approx(0.5));
}

TEST_CASE("energy reaches its queue per device, averaged over the slot", "[unit][control]") {
  auto cfg = small_config();
  cfg.budget.energy_per_slot.push_back({10, 4.0});
  controller c(cfg, policy("dp_even"));
  auto d = c.decide(0);
  REQUIRE(d);
  for (double j : {6.0, 10.0}) {
    auto m = ran(d->plan, {1, 1, 1, 1}, 0);
    m.energy_j = {{10, j}, {11, 100.0}};
    c.observe(m);
  }
  c.close_slot();
  const auto q = c.queues();
  REQUIRE(q.energy.size() == 1);
  CHECK(q.energy[0].first == 10);
  CHECK(q.energy[0].second == Approx(8.0 / 4.0 - 1.0));  // mean 8 J against 4 J
}

TEST_CASE("a revoked decision leaves the plan before it in force", "[unit][control]") {
  auto cfg = small_config();
  controller c(cfg, policy("dp_even"));
  auto first = c.decide(0);
  REQUIRE(first);
  // Device 13 fails during slot 1 but nobody knows yet: the decision still uses it.
  auto world = cfg.cluster;
  world.devices[3].available = false;
  c.announce(world);
  auto blind = c.decide(1, {13});
  REQUIRE(blind);
  CHECK(blind->plan.groups.size() == 4);
  c.revoke("device 13 failed during the step");
  REQUIRE(c.current());
  CHECK(c.current()->groups == first->plan.groups);
  auto known = c.decide(1);
  REQUIRE(known);
  CHECK(known->plan.groups.size() == 3);
  CHECK(known->reason.find("device 13 failed") != std::string::npos);
}

TEST_CASE("devices described on one host share its node: their sums run over same_node links", "[unit][control]") {
  auto cfg = small_config();
  cfg.cluster.tiers.same_rack = {1e6, 1e-3};   // between nodes: 1 MB/s, the sums crawl
  cfg.cluster.tiers.same_node = {1e11, 5e-6};  // within one
  controller c(cfg, policy("dp_balanced"));
  auto apart = c.decide(0);  // each device a node of its own (node -1)
  REQUIRE(apart);
  for (int id = 10; id < 14; ++id) c.join(id, 1, 0, 5);
  auto together = c.decide(1);
  REQUIRE(together);
  CHECK(together->reason.find("device 12 is on node 5") != std::string::npos);
  // The policy itself on the cluster with the four on node 5.
  auto host = cfg;
  for (auto& d : host.cluster.devices) d.node = 5;
  const planner::problem p(host.profile, host.cluster, host.planner, host.budget);
  auto direct = policy("dp_balanced")->decide({p, nullptr, {}, 0});
  REQUIRE(direct);
  CHECK(together->plan.groups == direct->groups);
  // The same data-parallel plan; apart, its ring over 0.4 MB of gradients (4 layers of 0.1
  // MB) crawls at 1 MB/s: 2 (n - 1) / n x 0.4 MB / 1 MB/s + 2 (n - 1) x 1 ms = 0.606 s more
  // a step than on one host, where the ring is all but free.
  CHECK(together->plan.groups == apart->plan.groups);
  CHECK(apart->predicted_s - together->predicted_s == Approx(0.606).epsilon(0.02));
  // A join that names no node keeps the one said before.
  c.join(12, 1);
  auto again = c.decide(2);
  REQUIRE(again);
  CHECK(again->reason.find("is on node") == std::string::npos);
  CHECK(again->predicted_s == Approx(together->predicted_s));
}

TEST_CASE("a device its node described plans with the memory it has, not the job's", "[unit][control]") {
  auto cfg = small_config();
  controller c(cfg, policy("dp_balanced"));
  auto d = c.decide(0);
  REQUIRE(d);
  const auto uses = [](const planner::plan& p, int id) {
    for (const auto& g : p.groups)
      if (std::find(g.devices.begin(), g.devices.end(), id) != g.devices.end()) return true;
    return false;
  };
  CHECK(uses(d->plan, 13));  // 16 GB as the job says
  // Device 13's node measured 0.3 MB: the model's 4 layers of 0.1 MB and their gradients do
  // not fit, so data parallelism leaves it out.
  c.join(13, 1, 3e5);
  auto next = c.decide(1);
  REQUIRE(next);
  CHECK_FALSE(uses(next->plan, 13));
  CHECK(next->reason.find("device 13 now has 0.3 MB of memory") != std::string::npos);
  // The planner itself on the cluster as described.
  auto described = cfg;
  described.cluster.devices[3].memory_bytes = 3e5;
  const planner::problem p(described.profile, described.cluster, described.planner, described.budget);
  auto direct = policy("dp_balanced")->decide({p, nullptr, {}, 0});
  REQUIRE(direct);
  CHECK(next->plan.groups == direct->groups);
  // A join that says nothing of memory (a re-probe) keeps what the node said.
  c.join(13, 1);
  auto again = c.decide(2);
  REQUIRE(again);
  CHECK_FALSE(uses(again->plan, 13));
}

TEST_CASE("hysteresis keeps a plan whose new shares gain less than the re-plan margin", "[unit][control]") {
  auto cfg = small_config();
  cfg.hysteresis = true;
  cfg.planner.plan_steps = 10;
  cfg.planner.replan_margin = 0.5;  // only big gains move (layer moves are weighed in planner_tests)
  controller c(cfg, policy("dp_balanced"));
  auto d = c.decide(0);
  REQUIRE(d);
  // Device 11 measures 10 % faster: the balanced shares would move by a few samples.
  c.observe(ran(d->plan, {1, 1.1, 1, 1}, 0));
  auto next = c.decide(1);
  REQUIRE(next);
  CHECK(next->plan.groups == d->plan.groups);
  CHECK(next->kept_plans == 1);
  CHECK_FALSE(next->kept_why.empty());
  // Without hysteresis the same measurement moves the shares: it was the hysteresis.
  cfg.hysteresis = false;
  controller free(cfg, policy("dp_balanced"));
  auto f0 = free.decide(0);
  free.observe(ran(f0->plan, {1, 1.1, 1, 1}, 0));
  auto f1 = free.decide(1);
  REQUIRE(f1);
  CHECK_FALSE(f1->plan.groups == f0->plan.groups);
  // A join is an event: the next decision is taken whatever the gain.
  c.leave(13);
  auto after = c.decide(2);
  REQUIRE(after);
  CHECK(after->plan.groups.size() == 3);
}

namespace {
// Prices 1, 2, 3, 4 a second: fewer, cheaper devices cost less a step. T4: all four devices
// with even shares, as predicted. A budget of 9 T4 a step over 10 slots lets three devices
// run (cost about 6 x 4/3 T4) but not all four (10 T4).
struct priced {
  controller_config cfg = small_config();
  double t4 = 0;
  priced() {
    for (int i = 0; i < 4; ++i) cfg.cluster.devices[i].price_per_s = i + 1;
    const planner::problem p(cfg.profile, cfg.cluster, cfg.planner, cfg.budget);
    auto even = policy("dp_even")->decide({p, nullptr, {}, 0});
    REQUIRE(even);
    t4 = planner::evaluate(p, *even, nullptr, {})->batch_time_s;
    cfg.budget.cost_per_slot = 9 * t4;
    cfg.budget.horizon_slots = 10;
    cfg.regret = false;  // the steps below cost the same whatever the plan: no plan to regret
  }
  // The cost a step of joint_lyapunov's plan after slots of 8 steps, each step measured at
  // `ratios[slot]` times its prediction and spending the budget exactly, so that what is left
  // over the slots left stays 9 T4.
  double cost_after(const std::vector<double>& ratios) const {
    controller c(cfg, policy("joint_lyapunov"));
    auto d = c.decide(0);
    REQUIRE(d);
    for (std::size_t s = 0; s < ratios.size(); ++s) {
      for (int k = 0; k < 8; ++k) {  // the first step carries the migration and is not counted
        auto m = ran(d->plan, {1, 1, 1, 1}, 9 * t4);
        m.time_s = ratios[s] * d->predicted_s;
        c.observe(m);
      }
      d = c.decide(static_cast<std::int64_t>(s) + 1);
      REQUIRE(d);
    }
    const planner::problem p(cfg.profile, cfg.cluster, cfg.planner, {});
    return planner::evaluate(p, d->plan, nullptr, {})->cost;
  }
};
}  // namespace

TEST_CASE("steps measured slower than predicted shrink a paced slot's cost allowance", "[unit][control]") {
  const priced w;
  // Two controllers see the same slot of steps at the same cost, but one measures each step
  // at twice its prediction, the other at the prediction.
  const double trusted = w.cost_after({1}), slow = w.cost_after({2});
  // The slot's allowance: what is left, 9 x 9 T4, over 9 slots. Halved when steps take twice
  // the predictions.
  CHECK(trusted <= 9 * w.t4 * (1 + 1e-9));
  CHECK(slow <= 4.5 * w.t4 * (1 + 1e-9));
  CHECK(trusted > 4.5 * w.t4);  // the allowance binds differently: the ratio did it
}

TEST_CASE("one surprising slot leaves the cost allowance alone, a lasting bias shrinks it", "[unit][control]") {
  const priced w;
  const double trusted = w.cost_after({1, 1, 1});
  // A slot at 3x (a device that slowed, say, before the estimates knew) among slots as
  // predicted: the bias is the median over slots, 1, and the allowance stays 9 T4.
  CHECK(w.cost_after({1, 1, 3}) == Approx(trusted));
  CHECK(trusted > 4.5 * w.t4);
  // Every slot at 2x: a lasting bias halves the allowance, as in the case above.
  CHECK(w.cost_after({2, 2, 2}) <= 4.5 * w.t4 * (1 + 1e-9));
}

namespace {
// A slot of three steps under `plan` at `speed`, each taking `time_s` and costing 1 (the
// first carries the migration and is not counted by the regret check).
void run_slot(controller& c, const planner::plan& plan, const std::vector<double>& speed, double time_s) {
  for (int k = 0; k < 3; ++k) {
    auto m = ran(plan, speed, 1);
    m.time_s = time_s;
    c.observe(m);
  }
}
}  // namespace

TEST_CASE("the regret check's verdict, by hand", "[unit][control]") {
  // 20 % slower, costs alike, no spread: over the 2 % floor.
  auto v = judge_regret({{1.0, 1.0}, {2, 2}, {}}, {{1.2, 1.2}, {2, 2}, {}}, 0.02, 0);
  CHECK(v.undo);
  CHECK(v.margin == Approx(0.02));
  CHECK(v.before_s == Approx(1.0));
  CHECK(v.after_s == Approx(1.2));
  // Means 1.1 and 1.3, sample variances 0.02 each: standard error sqrt(0.02/2 + 0.02/2) =
  // 0.1414, margin 2 x 0.1414 / 1.1 = 0.2571 > 0.1818 slower: kept.
  v = judge_regret({{1.0, 1.2}, {2, 2}, {}}, {{1.2, 1.4}, {2, 2}, {}}, 0.02, 0);
  CHECK_FALSE(v.undo);
  CHECK(v.margin == Approx(2 * std::sqrt(0.02) / 1.1));
  // Two steps that agree prove little on a machine that showed 20 % step-to-step noise:
  // variances at least 0.04, standard error 0.2, margin 0.4.
  v = judge_regret({{1.0, 1.0}, {2, 2}, {}}, {{1.2, 1.2}, {2, 2}, {}}, 0.02, 0.2);
  CHECK_FALSE(v.undo);
  CHECK(v.margin == Approx(0.4));
  // Slower but half the cost (a budget's choice): kept.
  CHECK_FALSE(judge_regret({{1.0, 1.0}, {2, 2}, {}}, {{1.2, 1.2}, {1, 1}, {}}, 0.02, 0).undo);
  // Slower, the same cost, 30 % fewer joules (an energy budget's choice): kept.
  CHECK_FALSE(judge_regret({{1.0, 1.0}, {2, 2}, {10, 10}}, {{1.2, 1.2}, {2, 2}, {7, 7}}, 0.02, 0).undo);
  CHECK(judge_regret({{1.0, 1.0}, {2, 2}, {10, 10}}, {{1.2, 1.2}, {2, 2}, {10, 10}}, 0.02, 0).undo);
  // One step is no verdict.
  v = judge_regret({{1.0, 1.0}, {2, 2}, {}}, {{1.2}, {2}, {}}, 0.02, 0);
  CHECK_FALSE(v.undo);
  CHECK(v.margin == 0);
}

TEST_CASE("a change that measured slower is undone at the next decision and not taken again at once", "[unit][control]") {
  auto cfg = small_config();
  controller c(cfg, policy("dp_balanced"));
  auto p0 = c.decide(0);
  REQUIRE(p0);
  // Device 11 measures twice as fast; the slot's steps take 1 s (the first carries the
  // migration and is not counted).
  run_slot(c, p0->plan, {1, 2, 1, 1}, 1);
  auto p1 = c.decide(1);
  REQUIRE(p1);
  REQUIRE_FALSE(p1->plan.groups == p0->plan.groups);  // more samples to device 11
  CHECK(p1->reverted_plans == 0);
  // Under the new shares each step takes 1.5 s: worse than the plan before, not cheaper.
  run_slot(c, p1->plan, {1, 2, 1, 1}, 1.5);
  auto p2 = c.decide(2);
  REQUIRE(p2);
  CHECK(p2->plan.groups == p0->plan.groups);
  CHECK(p2->reverted_plans == 1);
  CHECK(p2->reverted_why.find("1500.00 ms a step against 1000.00 ms") != std::string::npos);
  CHECK(p2->reason.find("undid the last change") != std::string::npos);
  // The estimates have not moved: the policy proposes the same shares again, refused.
  run_slot(c, p2->plan, {1, 2, 1, 1}, 1);
  auto p3 = c.decide(3);
  REQUIRE(p3);
  CHECK(p3->plan.groups == p0->plan.groups);
  CHECK(p3->kept_why.find("undone") != std::string::npos);
  // A device leaves: the world changed, the policy's plan is taken.
  c.leave(13);
  auto p4 = c.decide(4);
  REQUIRE(p4);
  CHECK(p4->plan.groups.size() == 3);
  // Off: the slower change stands.
  cfg.regret = false;
  controller off(cfg, policy("dp_balanced"));
  auto q0 = off.decide(0);
  run_slot(off, q0->plan, {1, 2, 1, 1}, 1);
  auto q1 = off.decide(1);
  run_slot(off, q1->plan, {1, 2, 1, 1}, 1.5);
  auto q2 = off.decide(2);
  REQUIRE(q2);
  CHECK(q2->plan.groups == q1->plan.groups);
  CHECK(q2->reverted_plans == 0);
}

TEST_CASE("a change is not blamed for a device of the plan before that slowed meanwhile", "[unit][control]") {
  controller c(small_config(), policy("dp_balanced"));
  auto p0 = c.decide(0);
  run_slot(c, p0->plan, {1, 2, 1, 1}, 1);
  auto p1 = c.decide(1);
  REQUIRE(p1);
  REQUIRE_FALSE(p1->plan.groups == p0->plan.groups);
  // Device 13 runs at half speed from now on: the new shares measure 1.5 s a step, but the
  // plan before, with device 13's 16 samples now taking twice as long, would take about 2 s.
  run_slot(c, p1->plan, {1, 2, 1, 0.5}, 1.5);
  auto p2 = c.decide(2);
  REQUIRE(p2);
  CHECK(p2->reverted_plans == 0);
  CHECK_FALSE(p2->plan.groups == p0->plan.groups);
}

TEST_CASE("a change that measured as fast or faster stands", "[unit][control]") {
  controller c(small_config(), policy("dp_balanced"));
  auto p0 = c.decide(0);
  run_slot(c, p0->plan, {1, 2, 1, 1}, 1);
  auto p1 = c.decide(1);
  REQUIRE(p1);
  run_slot(c, p1->plan, {1, 2, 1, 1}, 0.8);
  auto p2 = c.decide(2);
  REQUIRE(p2);
  CHECK(p2->plan.groups == p1->plan.groups);
  CHECK(p2->reverted_plans == 0);
}

namespace {
// Every available device estimated at speed 0.5 or more, alone with an even share: a policy
// that drops slow devices outright, to test what the controller makes of it.
class fast_only final : public planner::policy {
 public:
  std::string name() const override { return "fast_only"; }
  result<planner::plan> decide(const planner::decision_context& ctx) override {
    planner::plan out;
    std::vector<int> ids;
    for (const auto& d : ctx.prob.cluster.devices)
      if (d.available && d.speed >= 0.5) ids.push_back(d.id);
    if (ids.empty()) return make_error("infeasible", "no device");
    const int L = ctx.prob.num_layers(), share = ctx.prob.cfg.batch / static_cast<int>(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k)
      out.groups.push_back({{ids[k]}, {0, L}, share + (k == 0 ? ctx.prob.cfg.batch % static_cast<int>(ids.size()) : 0), share});
    return out;
  }
};
}  // namespace

TEST_CASE("one noisy slot never drops a device, a second slot measured slow does", "[unit][control]") {
  auto cfg = small_config();
  cfg.regret = false;  // the drop alone
  controller c(cfg, std::make_shared<fast_only>());
  auto p0 = c.decide(0);
  REQUIRE(p0);
  REQUIRE(p0->plan.groups.size() == 4);
  // One slot measures device 10 at a tenth of its speed (a load spike, say).
  c.observe(ran(p0->plan, {0.1, 1, 1, 1}, 1));
  auto p1 = c.decide(1);
  REQUIRE(p1);
  // The layout stays, re-shared: device 10 keeps the least share, the others take the rest.
  REQUIRE(p1->plan.groups.size() == 4);
  for (const auto& g : p1->plan.groups) {
    CHECK(g.splits == p0->plan.groups[0].splits);
    if (g.devices[0] == 10) CHECK(g.share < p0->plan.groups[0].share);
  }
  CHECK(p1->kept_why.find("kept device 10: measured at speed 0.1 (was 1)") != std::string::npos);
  // It was a spike: measured fast again, it stays.
  c.observe(ran(p1->plan, {1, 1, 1, 1}, 1));
  auto p2 = c.decide(2);
  REQUIRE(p2);
  CHECK(p2->plan.groups.size() == 4);
  // Slow in two slots running: dropped at the second.
  c.observe(ran(p2->plan, {0.1, 1, 1, 1}, 1));
  auto p3 = c.decide(3);
  REQUIRE(p3);
  CHECK(p3->plan.groups.size() == 4);
  c.observe(ran(p3->plan, {0.1, 1, 1, 1}, 1));
  auto p4 = c.decide(4);
  REQUIRE(p4);
  CHECK(p4->plan.groups.size() == 3);
  CHECK(p4->kept_why.empty());
}

TEST_CASE("a controller without a policy says so", "[unit][control]") {
  controller c(small_config(), nullptr);
  auto d = c.decide(0);
  REQUIRE_FALSE(d);
  CHECK(d.err().message.find("policy") != std::string::npos);
}

TEST_CASE("stages_of reads layers, samples and micro-batches off the plan", "[unit][control]") {
  planner::plan p;
  p.groups.push_back({{10, 11}, {0, 1, 4}, 40, 16});
  p.groups.push_back({{12}, {0, 4}, 24, 8});
  const auto st = stages_of(p, {{11, 0.5}, {12, 0.25}});
  REQUIRE(st.size() == 3);
  CHECK(st[0].device == 10);
  CHECK(st[0].compute_s == 0);
  CHECK(st[1].first_layer == 1);
  CHECK(st[1].end_layer == 4);
  CHECK(st[1].micro_batches == 3);  // ceil(40 / 16)
  CHECK(st[1].compute_s == 0.5);
  CHECK(st[2].samples == 24);
  CHECK(st[2].micro_batches == 3);
}

TEST_CASE("price: every stage's device at its price for the step, each one's power over its compute", "[unit][control]") {
  measurement m;
  m.time_s = 2;
  m.stages = {{10, 0, 2, 0.5, 32, 2}, {11, 2, 4, 1.5, 32, 2}};
  m.energy_j = {{99, 1.0}};  // stale: replaced
  price(m, [](int id) { return id == 10 ? 0.25 : 1.0; }, [](int id) { return id == 10 ? 100.0 : 40.0; });
  CHECK(m.cost == (0.25 + 1.0) * 2);
  REQUIRE(m.energy_j.size() == 2);
  CHECK(m.energy_j[0] == std::make_pair(10, 50.0));  // 100 W x 0.5 s
  CHECK(m.energy_j[1] == std::make_pair(11, 60.0));  // 40 W x 1.5 s
}

TEST_CASE("paced turns a run's slots into the controller's steps", "[unit]") {
  controller_config c = small_config();
  c.cluster.devices[1].speed = 4;
  const auto job = paced(c, {5, 2, true});  // a training job: slots of 5 steps, devices join
  CHECK(job.planner.plan_steps == 10);  // 2 slots of 5 steps: migration is weighed over them
  for (const auto& d : job.cluster.devices) {
    CHECK(d.speed == 1);  // unknown until the device joins with its benchmark
    CHECK_FALSE(d.available);
  }
  const auto sim = paced(c, {1, 3, false});  // the simulator: a slot is a step, devices as announced
  CHECK(sim.planner.plan_steps == 3);
  CHECK(sim.cluster.devices[1].speed == 4);
  CHECK(sim.cluster.devices[1].available);
  CHECK(paced(c, {0, 2, false}).planner.plan_steps == 2);  // no slot is shorter than a step
  CHECK(paced(c, {1, 1.4, false}).planner.plan_steps == 1);
}
