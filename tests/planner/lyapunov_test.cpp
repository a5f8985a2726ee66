// Virtual queues follow their recursion, and the Lyapunov policy keeps a binding budget.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>

#include "planner/evaluate.hpp"
#include "planner/lyapunov.hpp"
#include "planner/policy.hpp"

using namespace dynapar;
using namespace dynapar::planner;

TEST_CASE("queue updates follow Q(t+1) = max(Q(t) + C(t) / C_bar - 1, 0)", "[unit][planner]") {
  budgets b;
  b.cost_per_slot = 2.0;
  b.energy_per_slot = {{7, 100.0}};
  virtual_queues q(b);
  const double costs[] = {3.0, 3.5, 0.5, 0.0, 4.0};
  const double energy[] = {150, 40, 40, 200, 0};
  double ref_q = 0, ref_z = 0;
  for (int t = 0; t < 5; ++t) {
    q.update(costs[t], {{7, energy[t]}, {8, 1e6}});  // device 8 has no budget: ignored
    ref_q = std::max(ref_q + costs[t] / 2.0 - 1.0, 0.0);
    ref_z = std::max(ref_z + energy[t] / 100.0 - 1.0, 0.0);
    CHECK(q.state().cost == Approx(ref_q));
    REQUIRE(q.state().energy.size() == 1);
    CHECK(q.state().energy[0].second == Approx(ref_z));
  }
  CHECK(ref_q == Approx(1.0));  // 0.5, 1.25, 0.5, 0, 1
}

TEST_CASE("with a known horizon the budget is paced over what is left", "[unit][planner]") {
  budgets b;
  b.cost_per_slot = 2.0;
  b.horizon_slots = 10;
  virtual_queues q(b);
  CHECK(q.paced_cost_budget() == 2.0);
  // Overspent: 5 slots at 3 leave 20 - 15 = 5 for 5 slots, 1 a slot; the queue grows by
  // cost / paced budget - 1 with the budget of the slot being paid.
  double ref_q = 0, spent = 0;
  for (int t = 0; t < 5; ++t) {
    const double paced = (20.0 - spent) / (10 - t);
    q.update(3.0, {});
    spent += 3.0;
    ref_q = std::max(ref_q + 3.0 / paced - 1.0, 0.0);
    CHECK(q.state().cost == Approx(ref_q));
  }
  CHECK(q.paced_cost_budget() == Approx(1.0));
  CHECK(q.state().cost_budget == Approx(1.0));
  // Overspent beyond the whole budget: a floor of a tenth, never zero or negative.
  q.update(6.0, {});
  CHECK(q.paced_cost_budget() == Approx(0.2));
  // Underspent: the rest of the run may spend more per slot.
  virtual_queues u(b);
  for (int t = 0; t < 5; ++t) u.update(1.0, {});
  CHECK(u.paced_cost_budget() == Approx(3.0));
  // Restored from a checkpoint, the pacing goes on where it was.
  virtual_queues r(b);
  r.restore(u.state());
  CHECK(r.paced_cost_budget() == Approx(3.0));
  // Without a horizon: the plain long-run budget.
  budgets open = b;
  open.horizon_slots = 0;
  virtual_queues o(open);
  for (int t = 0; t < 5; ++t) o.update(3.0, {});
  CHECK(o.paced_cost_budget() == 2.0);
}

TEST_CASE("energy budgets are paced over a known horizon like cost", "[unit][planner]") {
  budgets b;
  b.energy_per_slot = {{7, 100.0}};
  b.horizon_slots = 4;
  virtual_queues q(b);
  CHECK(q.paced_energy_budget(0) == 100.0);
  q.update(0, {{7, 150.0}});  // Z = 150 / 100 - 1
  CHECK(q.state().energy[0].second == Approx(0.5));
  CHECK(q.paced_energy_budget(0) == Approx(250.0 / 3));  // 400 - 150 left for 3 slots
  q.update(0, {{7, 150.0}});  // Z = 0.5 + 150 / (250 / 3) - 1
  CHECK(q.state().energy[0].second == Approx(1.3));
  CHECK(q.paced_energy_budget(0) == Approx(50.0));
  REQUIRE(q.state().energy_budget.size() == 1);
  CHECK(q.state().energy_budget[0].second == Approx(50.0));
  // A checkpoint's state restores the pacing, and the planner's weight follows the paced budget.
  virtual_queues r(b);
  r.restore(q.state());
  CHECK(r.paced_energy_budget(0) == Approx(50.0));
  CHECK(r.state().energy[0].second == Approx(1.3));
}

TEST_CASE("without a budget the cost queue stays empty", "[unit][planner]") {
  virtual_queues q(budgets{});
  q.update(1e9, {});
  CHECK(q.state().cost == 0);
}

namespace {
struct run_result {
  double avg_time = 0, avg_cost = 0, final_q = 0;
};

run_result run_slots(const std::string& policy, double budget, int slots) {
  model_profile m;
  for (int l = 0; l < 8; ++l) m.layers.push_back({"l", 1e-3, 2e-3, 0, 1e4, 1e6, 1e4});
  cluster_state c;
  const double speeds[] = {8, 4, 2, 1, 1, 1};
  for (int i = 0; i < 6; ++i) {
    device_spec d;
    d.id = i;
    d.speed = speeds[i];
    d.price_per_s = i < 2 ? 10.0 : 1.0;  // fast devices cost much more per unit of speed
    d.node = 0;
    c.devices.push_back(d);
  }
  planner_config cfg;
  cfg.batch = 128;
  cfg.v = 1;
  budgets b;
  b.cost_per_slot = budget;
  problem p(m, c, cfg, b);
  virtual_queues q(b);
  auto pol = std::move(*make_policy(policy));
  std::optional<plan> prev;
  run_result r;
  for (int t = 0; t < slots; ++t) {
    auto pl = pol->decide({p, prev ? &*prev : nullptr, q.state(), t});
    REQUIRE(pl);
    auto rep = evaluate(p, *pl, prev ? &*prev : nullptr, q.state());
    REQUIRE(rep);
    q.update(rep->cost, rep->device_energy_j);
    r.avg_time += rep->batch_time_s / slots;
    r.avg_cost += rep->cost / slots;
    prev = *pl;
  }
  r.final_q = q.state().cost;
  return r;
}
}  // namespace

TEST_CASE("joint_lyapunov meets a binding cost budget on average, joint_greedy does not", "[unit][planner]") {
  const auto greedy = run_slots("joint_greedy", 1e9, 5);
  const double budget = 0.6 * greedy.avg_cost;  // binds: the fastest plan costs more
  const int slots = 400;
  const auto lyap = run_slots("joint_lyapunov", budget, slots);
  const auto greedy_b = run_slots("joint_greedy", budget, 50);
  CHECK(greedy_b.avg_cost > budget);
  // Violation of the time average is at most Q(T) / T budgets (Neely 2010, ch. 4; Q counts budgets).
  CHECK(lyap.avg_cost <= budget * (1 + lyap.final_q / slots) + 1e-12);
  CHECK(lyap.avg_cost <= budget * 1.05);
  CHECK(lyap.avg_time > greedy.avg_time);  // the budget costs speed
}

namespace {
// tests/cli/energy.yaml's devices: device 0 twice as fast as device 1 at 8 times the power.
// decide() is joint_lyapunov's plan for `slot` under budgets `b` and queues `q`, priced.
struct power_pair {
  model_profile m;
  cluster_state c;
  planner_config cfg;
  std::shared_ptr<policy> pol = std::move(*make_policy("joint_lyapunov"));
  power_pair() {
    cfg.batch = 128;
    cfg.micro_batch = 16;
    for (int l = 0; l < 4; ++l) m.layers.push_back({"l", 1e-4, 2e-4, 0, 1e4, 1e5, 1e4});
    for (int i = 0; i < 2; ++i) {
      device_spec d;
      d.id = i;
      d.speed = i == 0 ? 2 : 1;
      d.power_w = i == 0 ? 400 : 50;
      d.node = 0;
      c.devices.push_back(d);
    }
  }
  plan_report decide(const budgets& b, const queue_state& q, int slot) const {
    problem p(m, c, cfg, b);
    auto pl = pol->decide({p, nullptr, q, slot});
    REQUIRE(pl);
    auto rep = evaluate(p, *pl, nullptr, q);
    REQUIRE(rep);
    return *rep;
  }
};

double joules_of_0(const plan_report& r) {
  double j = 0;
  for (const auto& [id, e] : r.device_energy_j)
    if (id == 0) j = e;
  return j;
}
}  // namespace

TEST_CASE("in the last slots a plan may not spend more than is left of the run's budget", "[unit][planner]") {
  const power_pair pp;
  budgets b;
  b.energy_per_slot = {{0, 1000.0}};  // joules a step, over 10 slots: 10 000 in all
  b.horizon_slots = 10;
  const auto last_slot = [&](const queue_state& q) {
    const auto rep = pp.decide(b, q, 9);
    return std::pair{joules_of_0(rep), rep.guard_term};
  };
  // An empty queue puts no weight on device 0's joules: the fastest plan gives it most of the
  // batch. Measure what that plan spends on it.
  queue_state free;
  free.energy = {{0, 0.0}};
  free.energy_spent = {{0, 0.0}};
  free.slots = 9;
  const auto [fast_j, fast_guard] = last_slot(free);
  REQUIRE(fast_j > 0);
  REQUIRE(fast_j < 3000);
  CHECK(fast_guard == 0);
  // The last slot, the queue empty after cheap slots, but only a third of that left of the
  // run's budget: the plan must fit what is left (device 1 alone, or device 0 with less).
  queue_state last = free;
  last.energy_spent = {{0, 10000 - fast_j / 3}};
  const auto [last_j, last_guard] = last_slot(last);
  CHECK(last_j <= fast_j / 3);
  CHECK(last_guard == 0);
  // One and a half times that left: the fastest plan is within it.
  queue_state more = last;
  more.energy_spent = {{0, 10000 - 1.5 * fast_j}};
  CHECK(last_slot(more).first == Approx(fast_j));
  // Already over the run's budget: nothing is left to guard, and the empty queue weighs
  // nothing: the fastest plan.
  queue_state over = last;
  over.energy_spent = {{0, 10000 + fast_j}};
  CHECK(last_slot(over).first == Approx(fast_j));
  // Without a horizon, nothing is left to guard: the same queues give the fastest plan.
  budgets open = b;
  open.horizon_slots = 0;
  CHECK(joules_of_0(pp.decide(open, last, 9)) == Approx(fast_j));
}

TEST_CASE("with a known horizon every slot is paced: what is left over the slots left", "[unit][planner]") {
  const power_pair pp;
  const auto joules_at = [&](const budgets& b, int slot, double spent) {
    queue_state q;
    q.energy = {{0, 0.0}};  // an empty queue: only the pacing can hold device 0 back
    q.energy_spent = {{0, spent}};
    q.slots = slot;
    return joules_of_0(pp.decide(b, q, slot));
  };
  // Unpaced (no horizon), the fastest plan: what it spends on device 0 is the reference.
  budgets open;
  open.energy_per_slot = {{0, 1.0}};
  const double fast_j = joules_at(open, 0, 0);
  REQUIRE(fast_j > 0);
  // A budget of 0.7 of that a slot over 10 slots. The first slot may spend 0.7 of it.
  budgets b = open;
  b.energy_per_slot = {{0, 0.7 * fast_j}};
  b.horizon_slots = 10;
  CHECK(joules_at(b, 0, 0) <= 0.7 * fast_j * (1 + 1e-9));
  // Half-way with only fast_j spent, 6 fast_j are left over 5 slots: the fastest plan fits.
  CHECK(joules_at(b, 5, fast_j) == Approx(fast_j));
  // Half-way with 4 fast_j spent, 3 are left over 5 slots: 0.6 of it a slot.
  CHECK(joules_at(b, 5, 4 * fast_j) <= 0.6 * fast_j * (1 + 1e-9));
  // Slack 0.5 lets the first slot spend 1.5 x 0.7 = 1.05 of it: the fastest plan stands.
  b.slot_slack = 0.5;
  CHECK(joules_at(b, 0, 0) == Approx(fast_j));
  // Slack 0.2: 0.84 of it.
  b.slot_slack = 0.2;
  CHECK(joules_at(b, 0, 0) <= 0.84 * fast_j * (1 + 1e-9));
  // A long run: 70 fast_j over 100 slots. The payback floor (a 20th of what is left, 3.5
  // fast_j) lets the first slot buy the fastest plan; without it, 0.7 of it at most.
  b.slot_slack = 0;
  b.horizon_slots = 100;
  CHECK(joules_at(b, 0, 0) == Approx(fast_j));
  b.payback = 0;
  CHECK(joules_at(b, 0, 0) <= 0.7 * fast_j * (1 + 1e-9));
  // Near the end the share stands alone: 3.5 fast_j left over the last 5 slots, 0.7 a slot
  // (a 20th of it, 0.175, is less).
  b.payback = 0.05;
  CHECK(joules_at(b, 95, 66.5 * fast_j) <= 0.7 * fast_j * (1 + 1e-9));
}
