// The simulation loop: online honesty, departures, determinism, budgets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "planner/builtin_profiles.hpp"
#include "planner/policy.hpp"
#include "sim/runner.hpp"

using namespace dynapar;
using namespace dynapar::sim;

namespace {
scenario small_scenario() {
  scenario s;
  s.model = *planner::builtin_profile("resnet50");
  const double speeds[] = {8, 4, 2, 1};
  for (int i = 0; i < 4; ++i) {
    planner::device_spec d;
    d.id = i;
    d.speed = speeds[i];
    d.memory_bytes = 32e9;
    d.price_per_s = speeds[i] * 1e-4;
    d.node = i / 2;
    s.cluster.devices.push_back(d);
  }
  s.cfg.batch = 128;
  s.slots = 40;
  s.seed = 3;
  return s;
}
}  // namespace

TEST_CASE("a policy never sees the future: a speed drop shows only after it is measured", "[unit][sim]") {
  auto s = small_scenario();
  s.measurement_noise = 0;
  s.estimate_smoothing = 1;
  s.traces.push_back({0, {{0, 1.0}, {20, 0.1}}, {}, {}});  // device 0 slows 10x at slot 20
  auto r = run_policy(s, "joint_greedy");
  REQUIRE(r);
  // Slot 20 was planned on the old speed: the simulated step is far above the prediction.
  const auto& at = r->slots[20];
  CHECK(at.batch_time_s > 1.5 * at.predicted_s);
  // Two slots later the estimate has caught up and the plan fits the new world again.
  const auto& after = r->slots[22];
  CHECK(after.batch_time_s < 1.2 * after.predicted_s);  // the model agrees with the DES again
  CHECK(after.batch_time_s < at.batch_time_s);
}

// Device 0, the fastest, all but stops (0.002 of its speed) for slots 10-24 and is dropped
// from the plan; nothing measures it after that. Its estimate must not stay at the burst's
// speed: once the burst is over the policy takes it back (here by slot 31; before, never).
TEST_CASE("a device dropped during a burst is taken back after it", "[unit][sim]") {
  auto s = small_scenario();
  s.slots = 50;
  s.measurement_noise = 0;
  s.traces.push_back({0, {{0, 1.0}, {10, 0.002}, {25, 1.0}}, {}, {}});
  for (const auto& name : {"joint_greedy", "joint_lyapunov"}) {
    INFO(name);
    auto r = run_policy(s, name);
    REQUIRE(r);
    const auto uses_0 = [&](int t) {
      const auto& d = r->slots[static_cast<std::size_t>(t)].devices;
      return std::find(d.begin(), d.end(), 0) != d.end();
    };
    CHECK(uses_0(9));
    bool dropped = false, back = false;
    for (int t = 10; t < 25; ++t) dropped = dropped || !uses_0(t);
    CHECK(dropped);
    for (int t = 25; t < 40; ++t) back = back || uses_0(t);
    CHECK(back);
    CHECK(uses_0(49));
  }
}

TEST_CASE("a device that leaves is never in a later plan", "[unit][sim]") {
  auto s = small_scenario();
  s.events.push_back({10, event_kind::leave, 0});
  for (const auto& name : {"joint_lyapunov", "dp_even", "hetpipe_static", "joint_static"}) {
    INFO(name);
    auto r = run_policy(s, name);
    REQUIRE(r);
    bool used_before = false;
    for (int t = 0; t < 10; ++t)
      for (int d : r->slots[t].devices) used_before = used_before || d == 0;
    CHECK(used_before);  // else its absence later would prove nothing
    for (int t = 10; t < s.slots; ++t) {
      CHECK(r->slots[t].ok);
      CHECK(std::find(r->slots[t].devices.begin(), r->slots[t].devices.end(), 0) == r->slots[t].devices.end());
    }
  }
}

TEST_CASE("an unannounced failure costs the step a re-run, then the device is gone", "[unit][sim]") {
  auto s = small_scenario();
  s.events.push_back({5, event_kind::fail, 0});
  auto r = run_policy(s, "joint_greedy");
  REQUIRE(r);
  CHECK(r->slots[5].failed);
  CHECK(r->slots[5].batch_time_s > s.detect_s);
  for (int t = 6; t < s.slots; ++t) CHECK_FALSE(r->slots[t].failed);
}

TEST_CASE("the same seed gives the same results, another seed does not", "[unit][sim]") {
  auto s = small_scenario();
  s.random.walk_sigma = 0.1;
  s.random.burst_start = 0.1;
  auto a = run_policy(s, "joint_lyapunov"), b = run_policy(s, "joint_lyapunov");
  REQUIRE(a);
  REQUIRE(b);
  for (int t = 0; t < s.slots; ++t) CHECK(a->slots[t].batch_time_s == b->slots[t].batch_time_s);
  s.seed = 4;
  auto c = run_policy(s, "joint_lyapunov");
  REQUIRE(c);
  CHECK(c->sum.mean_batch_time_s != a->sum.mean_batch_time_s);
}

namespace {
// Three nodes of four GPUs, GPT-2 small; all four devices of node 1 fail in the same slot.
scenario node_failure_scenario() {
  scenario s;
  s.model = *planner::builtin_profile("gpt2_small");
  const double speeds[] = {12, 6, 2.5};
  for (int i = 0; i < 12; ++i) {
    planner::device_spec d;
    d.id = i;
    d.speed = speeds[i / 4];
    d.memory_bytes = 80e9;
    d.price_per_s = speeds[i / 4] * 1e-4;
    d.node = i / 4;
    s.cluster.devices.push_back(d);
  }
  s.cfg.batch = 128;
  s.slots = 30;
  s.seed = 3;
  for (int id = 4; id < 8; ++id) s.events.push_back({20, event_kind::fail, id});
  return s;
}
}  // namespace

TEST_CASE("a whole node failing at once: every policy re-plans on the survivors", "[unit][sim][races_twin]") {
  const auto s = node_failure_scenario();
  for (const auto& name : planner::policy_names()) {
    if (name == std::string("oracle")) continue;  // enumerates at most 7 devices
    INFO(name);
    auto r = run_policy(s, name);
    REQUIRE(r);
    INFO(r->sum.error);
    CHECK(r->sum.error.empty());
    for (int t = 0; t < s.slots; ++t) {
      INFO("slot " << t);
      CHECK(r->slots[t].ok);
      CHECK(std::isfinite(r->slots[t].batch_time_s));
      if (t > 20) CHECK(r->slots[t].devices_used <= 8);
    }
    CHECK(std::isfinite(r->sum.mean_batch_time_s));
  }
}

TEST_CASE("policies simulated on parallel threads give what each gives alone", "[unit][sim][races]") {
  // What `dynapar simulate --policies all` does. The ThreadSanitizer build runs it instead of
  // the case above (it runs each policy alone too); ASan runs that one instead of this.
  const auto s = node_failure_scenario();
  std::vector<std::string> names;
  for (const auto& n : planner::policy_names())
    if (n != std::string("oracle")) names.push_back(n);
  std::vector<double> alone, together(names.size(), -1);
  for (const auto& n : names) alone.push_back(run_policy(s, n)->sum.mean_batch_time_s);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < names.size(); ++i)
    threads.emplace_back([&, i] {
      auto r = run_policy(s, names[i]);
      if (r) together[i] = r->sum.mean_batch_time_s;
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    CHECK(together[i] == alone[i]);
  }
}

TEST_CASE("an energy budget binds in simulation through the controller's energy queue", "[unit][sim]") {
  // Device 0 is twice as fast as device 1 and draws all the power: unbudgeted, the fastest
  // plan gives it most of the batch. Capped at half of what it then spent a step, the run's
  // mean must stay within the cap (the queue runs the same code as in training).
  scenario s;
  s.model = *planner::builtin_profile("resnet50");
  for (int i = 0; i < 2; ++i) {
    planner::device_spec d;
    d.id = i;
    d.speed = i == 0 ? 2 : 1;
    d.memory_bytes = 32e9;
    d.power_w = i == 0 ? 400 : 0;
    s.cluster.devices.push_back(d);
  }
  s.cfg.batch = 64;
  s.slots = 60;
  s.seed = 5;
  auto free = run_policy(s, "joint_lyapunov");
  REQUIRE(free);
  const double cap = free->sum.avg_energy_j / 2;
  s.budget.energy_per_slot.push_back({0, cap});
  auto bound = run_policy(s, "joint_lyapunov");
  REQUIRE(bound);
  INFO("unbudgeted " << free->sum.avg_energy_j << " J a step, cap " << cap << ", budgeted " << bound->sum.avg_energy_j);
  CHECK(bound->sum.avg_energy_j <= 1.02 * cap);
  CHECK(bound->sum.avg_energy_j >= 0.8 * cap);  // it spends what it may: speed is bought with it
  CHECK(bound->sum.mean_batch_time_s > free->sum.mean_batch_time_s);
}
