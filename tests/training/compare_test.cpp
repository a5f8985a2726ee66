// --compare's runs: each policy trains the first steps with a fresh controller, its budget
// paced over those steps' slots; the means leave step 0 out; a failed run names its policy.
// A fake trainer stands in for the actors, with step times chosen by hand.
#include <catch2/catch.hpp>

#include "training/compare.hpp"

using namespace dynapar;
using namespace dynapar::training;

TEST_CASE("each policy's mean step time and cost over the same steps as this run's, step 0 left out", "[unit][training]") {
  train_settings s;
  s.steps = 100;
  s.slot_steps = 10;
  s.controller = control_settings{};
  s.controller->policy = "joint_lyapunov";
  s.controller->core.budget.horizon_slots = 10;
  s.controller->restore = control::controller_snapshot{};
  // This run: 9 s of start-up, then 0.1 s a step.
  std::map<std::int64_t, double> ours;
  for (std::int64_t t = 0; t < 100; ++t) ours[t] = t == 0 ? 9.0 : 0.1;
  std::vector<train_settings> seen;
  const train_fn fake = [&](const train_settings& run, const train_callbacks& cb) -> result<train_outcome> {
    seen.push_back(run);
    const double per_step = run.controller->policy == "dp_even" ? 0.2 : 0.4;
    for (std::int64_t t = 0; t < run.steps; ++t) {
      step_record r;
      r.step = t;
      r.time_s = t == 0 ? 5.0 : per_step;
      r.cost = 2 * r.time_s;
      cb.on_step(r);
    }
    return train_outcome{};
  };
  auto runs = compare_policies(s, {"dp_even", "dp_balanced"}, 25, ours, fake);
  REQUIRE(runs);
  REQUIRE(runs->size() == 2);
  const auto& a = (*runs)[0];
  CHECK(a.policy == "dp_even");
  CHECK(a.steps == 25);
  CHECK(a.mean_step_time_s == Approx(0.2));
  CHECK(a.this_run_mean_step_time_s == Approx(0.1));
  CHECK(a.speedup == Approx(2.0));
  CHECK(a.avg_cost == Approx(0.4));
  CHECK((*runs)[1].speedup == Approx(4.0));
  // Each ran 25 steps under its own policy, paced over ceil(25 / 10) = 3 slots, from scratch.
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].controller->policy == "dp_balanced");
  CHECK(seen[0].steps == 25);
  CHECK(seen[0].controller->core.budget.horizon_slots == 3);
  CHECK_FALSE(seen[0].controller->restore.has_value());
  CHECK_FALSE(seen[0].resume.has_value());

  const train_fn failing = [](const train_settings&, const train_callbacks&) -> result<train_outcome> {
    return make_error("no_devices", "nothing to run on");
  };
  auto failed = compare_policies(s, {"dp_even"}, 25, ours, failing);
  REQUIRE_FALSE(failed);
  CHECK(failed.err().message == "--compare dp_even: nothing to run on");

  s.controller.reset();
  CHECK_FALSE(compare_policies(s, {"dp_even"}, 25, ours, fake));
}
