// The recovery decision case by case, each expectation worked out by hand from
// docs/RELIABILITY.md: a step re-runs or stands, a layer that lost every live replica rolls
// the run back to the cut, losses add up within a plan, and what cannot be mended says why.
#include <catch2/catch.hpp>

#include "control/recovery.hpp"

using namespace dynapar::control;
using action = recovery_decision::action;

namespace {
// Two groups: [0 > 1] holds layers 0-1 on 0 and 2-3 on 1; [2] holds all four.
recovery_facts two_groups() {
  recovery_facts f;
  f.holders = {{0, {0, 2}}, {1, {0, 2}}, {2, {1, 2}}, {3, {1, 2}}};
  f.controller = true;
  f.step = 12;
  f.cut_step = 8;
  return f;
}
}  // namespace

TEST_CASE("a device lost with replicas elsewhere: the step re-runs, or stands if it had applied") {
  auto f = two_groups();
  f.lost = {1};
  auto d = decide_recovery(f);
  CHECK(d.what == action::go_on);
  CHECK(d.next_step == 12);
  CHECK_FALSE(d.step_applied);
  CHECK(d.wiped == std::set<int>{1});
  CHECK(d.undone.empty());
  f.committed = true;
  d = decide_recovery(f);
  CHECK(d.what == action::go_on);
  CHECK(d.next_step == 13);
  CHECK(d.step_applied);
}

TEST_CASE("a second loss under the same plan takes the last replica: roll back to the cut") {
  auto f = two_groups();
  f.wiped = {2};  // lost by an earlier recovery; the plan has not been applied since
  f.lost = {0};   // alone, 0 would leave layers 0-1 on 2: but 2 is gone
  auto d = decide_recovery(f);
  CHECK(d.what == action::roll_back);
  CHECK(d.next_step == 8);
  CHECK(d.undone == std::vector<std::int64_t>{8, 9, 10, 11});  // step 12 never applied
  CHECK(d.wiped.empty());  // the cut's layers are placed afresh
  // Had the attempt applied, its step goes back too.
  f.committed = true;
  d = decide_recovery(f);
  CHECK(d.undone == std::vector<std::int64_t>{8, 9, 10, 11, 12});
  CHECK(d.step_applied);
  // Without the earlier loss the same device is not fatal (the regression of seeds 308, 405).
  f.wiped.clear();
  CHECK(decide_recovery(f).what == action::go_on);
}

TEST_CASE("losing both devices of a group at once keeps the other group's replicas") {
  auto f = two_groups();
  f.lost = {0, 1};
  const auto d = decide_recovery(f);
  CHECK(d.what == action::go_on);
  CHECK(d.wiped == std::set<int>{0, 1});
  f.lost = {1, 2};  // layers 2-3 had only 1 and 2
  CHECK(decide_recovery(f).what == action::roll_back);
}

TEST_CASE("late with everyone answering: settled without a re-plan, until too many in a row") {
  auto f = two_groups();
  f.late = true;
  auto d = decide_recovery(f);
  CHECK(d.what == action::retry_late);
  CHECK(d.next_step == 12);
  f.committed = true;
  CHECK(decide_recovery(f).next_step == 13);
  f.late_retries = 4;  // the fifth late attempt in a row
  d = decide_recovery(f);
  CHECK(d.what == action::give_up);
  CHECK(d.code == "too_slow");
  CHECK(d.why.find("5 times in a row") != std::string::npos);
}

TEST_CASE("what recovery cannot mend") {
  auto f = two_groups();
  auto d = decide_recovery(f);  // a failure with nobody lost and not late: not a fault
  CHECK(d.what == action::give_up);
  CHECK(d.code.empty());
  f.controller = false;
  f.lost = {1, 2};
  d = decide_recovery(f);
  CHECK(d.what == action::give_up);
  CHECK(d.code == "device_lost");
  CHECK(d.why == "device 1, 2 lost; going on without it needs a controller (replan_every)");
}
