// The driver's record of where each device stands (control/membership.hpp), transition by
// transition, against what the driver asks of it: who may be planned, who leaves, whether a
// run must recover before its next step.
#include <catch2/catch.hpp>

#include "control/membership.hpp"

using dynapar::control::membership;

TEST_CASE("devices join, announce they leave, come back and retire", "[unit][control]") {
  membership m;
  m.join(3);
  m.join(1);
  m.join(2);
  CHECK(m.joined_ids() == std::vector<int>{1, 2, 3});
  CHECK(m.joined_count() == 3);
  m.depart(2);
  CHECK_FALSE(m.joined(2));
  CHECK(m.leaving(2));
  CHECK(m.joined_ids() == std::vector<int>{1, 3});
  CHECK(m.leaving_ids() == std::vector<int>{2});
  m.depart(7);  // never joined: nothing to leave
  CHECK(m.leaving_ids() == std::vector<int>{2});
  m.join(2);  // back before a plan moved its layers away
  CHECK(m.joined(2));
  CHECK_FALSE(m.leaving(2));
  m.depart(2);
  m.retire(2);
  CHECK_FALSE(m.joined(2));
  CHECK_FALSE(m.leaving(2));
  m.retire(1);  // a device in the run is not retired
  CHECK(m.joined(1));
}

TEST_CASE("a kill sent and a stop seen mark a device without taking it out of the run", "[unit][control]") {
  membership m;
  m.join(0);
  m.join(1);
  m.join(2);
  m.kill_sent(1);
  CHECK(m.failing(1));
  CHECK(m.joined(1));  // unannounced: the plan may still use it until the fault path finds it
  CHECK(m.joined_ids() == std::vector<int>{0, 1, 2});
  CHECK_FALSE(m.member_died());
  m.stopped(1);
  CHECK(m.dead(1));
  CHECK(m.member_died());
  CHECK(m.dead_ids() == std::set<int>{1});
  m.forget(1);  // recovered from
  CHECK_FALSE(m.joined(1));
  CHECK_FALSE(m.failing(1));
  CHECK_FALSE(m.dead(1));
  CHECK_FALSE(m.member_died());
  // A leaving device that dies must be recovered from too; a retired one need not, but it is
  // still reported dead (the probes after a failed step take it as lost).
  m.depart(2);
  m.stopped(2);
  CHECK(m.member_died());
  m.retire(2);
  CHECK_FALSE(m.member_died());
  CHECK(m.dead_ids() == std::set<int>{2});
  m.stopped(9);  // an actor that never joined: dead, not a member
  CHECK_FALSE(m.member_died());
  CHECK(m.dead_ids() == std::set<int>{2, 9});
  m.join(9);  // the flag stays until recovery forgets it
  CHECK(m.member_died());
}

TEST_CASE("wiped devices hold nothing of the plan in force until the next plan is applied", "[unit][control]") {
  membership m;
  m.join(4);
  m.wipe(4);
  m.wipe(5);
  CHECK(m.wiped(4));
  CHECK(m.wiped_ids() == std::set<int>{4, 5});
  m.forget(4);  // wiping is not membership: recovery decides it apart
  CHECK(m.wiped(4));
  m.set_wiped({6});
  CHECK(m.wiped_ids() == std::set<int>{6});
  m.join(6);  // back under the same id: a fresh device, still holding nothing
  CHECK(m.wiped(6));
  m.plan_applied();
  CHECK(m.wiped_ids().empty());
}
