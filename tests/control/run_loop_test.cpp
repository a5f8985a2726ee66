// The run's loop between steps (control/run_loop.hpp) fed synthetic outcomes: the commands it
// gives, in order, against sequences worked out by hand from the job's cadences; where a
// recovery makes the run go on; and when the next step may start early.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "control/run_loop.hpp"

using namespace dynapar::control;

namespace {

// A command as a word: "slot 1", "gather", "plan" ("plan*" when a re-plan is due or forced),
// "step 3" ("step 3 early", "step 3 moved"), "recover 2" ("recover 2 committed"), ...; an
// attempt's first command is marked "| ".
std::string word(const run_command& c) {
  std::string w;
  switch (c.what) {
    case run_duty::enter_slot: w = "slot " + std::to_string(c.slot); break;
    case run_duty::gather: w = "gather"; break;
    case run_duty::recover: w = "recover " + std::to_string(c.step) + (c.committed ? " committed" : ""); break;
    case run_duty::await_devices: w = "await"; break;
    case run_duty::plan: w = c.replan ? "plan*" : "plan"; break;
    case run_duty::apply: w = "apply"; break;
    case run_duty::retire: w = "retire"; break;
    case run_duty::step: w = "step " + std::to_string(c.step) + (c.early ? " early" : "") + (c.moved ? " moved" : ""); break;
    case run_duty::perturb: w = "perturb " + std::to_string(c.step); break;
    case run_duty::check_replicas: w = "check " + std::to_string(c.step); break;
    case run_duty::checkpoint: w = "checkpoint " + std::to_string(c.step); break;
    case run_duty::evaluate: w = "evaluate " + std::to_string(c.step); break;
    case run_duty::finish: w = "finish"; break;
    case run_duty::stop: w = "stop"; break;
  }
  return (c.opens ? "| " : "") + w;
}

// The world's answers, by default those of a run where nothing goes wrong: a plan is decided
// when a re-plan is due (moving no layer), every step commits serially.
struct world {
  run_facts facts;
  std::function<bool(const run_command&)> step_fails = [](const run_command&) { return false; };
  std::function<bool(const run_command&)> duty_fails = [](const run_command&) { return false; };
  std::function<std::int64_t(const run_command&)> recover_to = [](const run_command& c) { return c.step; };
  std::function<bool(const run_loop&, const run_command&)> starts_early = [](const run_loop&, const run_command&) { return false; };
  bool die_once = false, none_once = false, infeasible_once = false;
};

std::vector<std::string> drive(run_loop& loop, world w, int limit = 200) {
  std::vector<std::string> out;
  for (int k = 0; k < limit; ++k) {
    const auto c = loop.next(w.facts.member_died);
    out.push_back(word(c));
    switch (c.what) {
      case run_duty::enter_slot: loop.slot_entered(false); break;
      case run_duty::gather:
        loop.gathered(false, std::exchange(w.die_once, false), std::exchange(w.none_once, false));
        break;
      case run_duty::recover: loop.recovered(w.recover_to(c), true); break;
      case run_duty::await_devices: loop.awaited(true); break;
      case run_duty::plan:
        if (std::exchange(w.infeasible_once, false)) loop.infeasible();
        else loop.planned(c.replan);
        break;
      case run_duty::apply: w.duty_fails(c) ? loop.failed() : loop.applied(c.step % 2 == 0); break;
      case run_duty::retire: loop.retired(); break;
      case run_duty::step:
        if (w.step_fails(c)) loop.step_failed(c.step == 2);
        else loop.committed(w.starts_early(loop, c));
        break;
      case run_duty::perturb:
      case run_duty::check_replicas:
      case run_duty::checkpoint:
      case run_duty::evaluate:
      case run_duty::finish: w.duty_fails(c) ? loop.failed() : loop.done(); break;
      case run_duty::stop: return out;
    }
  }
  FAIL("the loop did not stop");
  return out;
}

using words = std::vector<std::string>;

// A loop that entered its first slot and stands at step 0 (the point a commit's query is asked
// from), the plan applied.
run_loop at_step_0(const run_cadence& c) {
  run_loop l(c);
  for (auto cmd = l.next(); cmd.what != run_duty::step; cmd = l.next()) {
    if (cmd.what == run_duty::enter_slot) l.slot_entered(false);
    if (cmd.what == run_duty::gather) l.gathered(false, false, false);
    if (cmd.what == run_duty::plan) l.planned(true);
    if (cmd.what == run_duty::apply) l.applied(false);
    if (cmd.what == run_duty::retire) l.retired();
  }
  return l;
}

// Pipelined control, one re-plan a slot.
run_cadence pipelined(std::int64_t steps, std::int64_t slot_steps) {
  run_cadence c;
  c.steps = steps;
  c.slot_steps = slot_steps;
  c.controller = true;
  c.replan_every = slot_steps;
  c.pipelined = true;
  return c;
}

run_cadence cadence(std::int64_t steps) {
  run_cadence c;
  c.steps = steps;
  c.slot_steps = 2;
  c.controller = true;
  c.replan_every = 2;
  return c;
}

}  // namespace

TEST_CASE("the run loop without faults: slots, re-plans on the cadence, the end", "[unit][control]") {
  run_loop loop(cadence(4));
  CHECK(drive(loop, {}) == words{"| slot 0", "gather", "plan*", "apply", "retire", "step 0 moved",  //
                                 "| gather", "plan", "retire", "step 1",                            //
                                 "| slot 1", "gather", "plan*", "apply", "retire", "step 2 moved",  //
                                 "| gather", "plan", "retire", "step 3",                            //
                                 "| finish", "stop"});
  CHECK(loop.over());
}

TEST_CASE("the run loop without a controller re-plans at the job's steps only, a resumed run from its step", "[unit][control]") {
  auto c = cadence(5);
  c.controller = false;
  c.replan_steps = {0, 3};  // a re-plan at step 0 is the job's plan: never due as a change
  c.start = 2;
  run_loop loop(c);
  CHECK(drive(loop, {}) == words{"| slot 1", "gather", "plan", "retire", "step 2",                  //
                                 "| gather", "plan*", "apply", "retire", "step 3",                  //
                                 "| slot 2", "gather", "plan", "retire", "step 4", "| finish", "stop"});
}

TEST_CASE("the run loop's duties after a step, in order, at their cadences", "[unit][control]") {
  auto c = cadence(4);
  c.slot_steps = 4;
  c.replan_every = 4;
  c.hash_every = 2;
  c.checkpoint_every = 3;
  c.epoch_steps = 4;
  c.perturb_step = 1;
  run_loop loop(c);
  CHECK(drive(loop, {}) == words{"| slot 0", "gather", "plan*", "apply", "retire", "step 0 moved",
                                 "| gather", "plan", "retire", "step 1", "perturb 1", "check 1",
                                 "| gather", "plan", "retire", "step 2", "checkpoint 2",
                                 "| gather", "plan", "retire", "step 3", "check 3", "evaluate 3",
                                 "| finish", "stop"});
}

TEST_CASE("the run loop goes on where each recovery says", "[unit][control]") {
  auto c = cadence(4);
  c.hash_every = 2;
  SECTION("a step that failed after its apply phase began goes on at the next step, re-planned") {
    world w;
    w.step_fails = [n = 0](const run_command& s) mutable { return s.step == 2 && n++ == 0; };
    w.recover_to = [](const run_command& r) { return r.step + (r.committed ? 1 : 0); };
    run_loop loop(c);
    const auto got = drive(loop, w);
    const words tail(got.begin() + 11, got.end());
    CHECK(tail == words{"| slot 1", "gather", "plan*", "apply", "retire", "step 2 moved", "recover 2 committed",
                        "| gather", "plan*", "apply", "retire", "step 3", "check 3", "| finish", "stop"});
  }
  SECTION("a failed check re-runs nothing: the run goes on after the checked step") {
    world w;
    w.duty_fails = [n = 0](const run_command& d) mutable { return d.what == run_duty::check_replicas && d.step == 1 && n++ == 0; };
    run_loop loop(c);
    const auto got = drive(loop, w);
    const words mid(got.begin() + 6, got.begin() + 18);
    CHECK(mid == words{"| gather", "plan", "retire", "step 1", "check 1", "recover 2",
                       "| slot 1", "gather", "plan*", "apply", "retire", "step 2 moved"});
  }
  SECTION("a rollback re-runs the steps since the cut, entering no slot again") {
    world w;
    w.step_fails = [n = 0](const run_command& s) mutable { return s.step == 3 && n++ == 0; };
    w.recover_to = [](const run_command&) { return std::int64_t{0}; };
    run_loop loop(c);
    const auto got = drive(loop, w);
    const words tail(got.begin() + 21, got.end());
    CHECK(tail == words{"recover 3", "| gather", "plan*", "apply", "retire", "step 0 moved",
                        "| gather", "plan", "retire", "step 1", "check 1",
                        "| gather", "plan*", "apply", "retire", "step 2 moved",
                        "| gather", "plan", "retire", "step 3", "check 3", "| finish", "stop"});
  }
  SECTION("the end's work failing re-plans, then tries the end again") {
    world w;
    w.duty_fails = [n = 0](const run_command& d) mutable { return d.what == run_duty::finish && n++ == 0; };
    run_loop loop(c);
    const auto got = drive(loop, w);
    const words tail(got.end() - 8, got.end());
    CHECK(tail == words{"| finish", "recover 4", "| gather", "plan*", "apply", "retire", "| finish", "stop"});
  }
  SECTION("a device dead between steps, none left, too few to hold the model") {
    world w;
    w.die_once = true;
    run_loop loop(c);
    auto got = drive(loop, w);
    CHECK(words(got.begin(), got.begin() + 4) == words{"| slot 0", "gather", "recover 0", "| gather"});
    w = {};
    w.none_once = true;
    run_loop none(c);
    got = drive(none, w);
    CHECK(words(got.begin(), got.begin() + 5) == words{"| slot 0", "gather", "await", "plan*", "apply"});
    w = {};
    w.infeasible_once = true;
    run_loop few(c);
    got = drive(few, w);
    CHECK(words(got.begin(), got.begin() + 7) == words{"| slot 0", "gather", "plan*", "await", "| gather", "plan*", "apply"});
  }
}

TEST_CASE("the run loop: a step starts early only when nothing is due before it", "[unit][control]") {
  auto c = pipelined(12, 4);
  run_loop loop(c);
  // Early starts as the driver asks the loop, at each commit.
  world w;
  w.starts_early = [](const run_loop& l, const run_command& s) { return l.may_start_early(s.step + 1, {}); };
  const auto got = drive(loop, w);
  CHECK(words(got.begin(), got.begin() + 10) ==
        words{"| slot 0", "gather", "plan*", "apply", "retire", "step 0 moved", "| step 1 early", "| step 2 early", "| step 3 early", "| slot 1"});

  c.slot_steps = 12;  // below: one slot
  c.replan_every = 12;
  auto at = at_step_0(c);
  const run_facts none;
  CHECK(at.may_start_early(1, none));
  CHECK_FALSE(run_loop(c).may_start_early(1, none));  // before the first slot is entered
  CHECK_FALSE(at.may_start_early(12, none));  // the end
  for (auto fact : {&run_facts::member_died, &run_facts::members_move, &run_facts::faults_due, &run_facts::recovering}) {
    run_facts f;
    f.*fact = true;
    CHECK_FALSE(at.may_start_early(1, f));
  }
  auto every = [&](auto field, std::int64_t v, std::int64_t blocked) {
    auto k = c;
    k.*field = v;
    auto l = at_step_0(k);
    CHECK_FALSE(l.may_start_early(blocked, none));
    CHECK(l.may_start_early(blocked + 1, none));
  };
  every(&run_cadence::hash_every, 2, 2);        // step 1's check
  every(&run_cadence::checkpoint_every, 3, 3);
  every(&run_cadence::epoch_steps, 2, 2);
  every(&run_cadence::perturb_step, 1, 2);
  every(&run_cadence::replan_every, 3, 3);      // the controller re-plans before step 3
  auto serial = c;
  serial.pipelined = false;
  CHECK_FALSE(at_step_0(serial).may_start_early(1, none));
  auto scheduled = c;
  scheduled.controller = false;
  scheduled.replan_steps = {2};
  CHECK_FALSE(at_step_0(scheduled).may_start_early(2, none));
  CHECK(at_step_0(scheduled).may_start_early(3, none));
  auto slots = c;
  slots.slot_steps = 4;
  CHECK_FALSE(at_step_0(slots).may_start_early(4, none));  // a slot begins
  CHECK(at_step_0(slots).may_start_early(3, none));
}

TEST_CASE("the run loop: a re-plan owed after a recovery stops early starts until it is made", "[unit][control]") {
  auto loop = at_step_0(pipelined(8, 8));
  CHECK(loop.may_start_early(1, {}));
  loop.step_failed(false);
  CHECK(loop.next().what == run_duty::recover);
  loop.recovered(0, true);
  CHECK_FALSE(loop.may_start_early(1, {}));  // the re-plan is owed
  CHECK(loop.next().what == run_duty::gather);
  loop.gathered(false, false, false);
  const auto plan = loop.next();
  CHECK(plan.replan);
  CHECK(loop.may_start_early(1, {}));
}

TEST_CASE("the run loop refuses an outcome out of turn", "[unit][control]") {
  run_loop loop(cadence(2));
  CHECK_THROWS_AS(loop.committed(false), std::logic_error);
  CHECK(loop.next().what == run_duty::enter_slot);
  CHECK_THROWS_AS(loop.planned(true), std::logic_error);
  CHECK_THROWS_AS(loop.recovered(0, true), std::logic_error);
}
