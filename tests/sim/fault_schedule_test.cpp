// A run's fault plan as it unfolds (sim/fault_schedule.hpp), against what each step and moment
// should bring, worked by hand: faults strike at their step or wait for their moment, the first
// placement's kill is armed before the first step and only then, a resumed run skips the
// faults before its start, what is pending before a step, and what never landed.
#include <catch2/catch.hpp>

#include "sim/fault_schedule.hpp"

using namespace dynapar::sim;

namespace {
fault at(std::int64_t step, fault_moment m = fault_moment::step, int device = -1) {
  fault f;
  f.step = step;
  f.device = device;
  f.moment = m;
  return f;
}
std::vector<int> devices(const std::vector<fault>& fs) {
  std::vector<int> out;
  for (const auto& f : fs) out.push_back(f.device);
  return out;
}
}  // namespace

TEST_CASE("fault schedule: faults strike at their step or wait for their moment", "[unit][sim]") {
  fault_schedule s({at(2, fault_moment::step, 1), at(2, fault_moment::sum, 2), at(4, fault_moment::early, 3), at(6, fault_moment::sum, 4)},
                   0, 7);
  CHECK(s.due(0).now.empty());
  CHECK_FALSE(s.pending(1));
  CHECK(s.pending(2));  // step 2's faults are due
  auto d = s.due(2);
  CHECK(devices(d.now) == std::vector<int>{1});
  CHECK(devices(d.armed) == std::vector<int>{2});
  CHECK(s.waiting(fault_moment::sum));
  CHECK(s.pending(3));  // a kill waits for a sum: a serial step brings one
  CHECK(devices(s.take(fault_moment::sum)) == std::vector<int>{2});
  CHECK_FALSE(s.waiting(fault_moment::sum));
  CHECK(s.take(fault_moment::sum).empty());
  d = s.due(4);
  CHECK(devices(d.armed) == std::vector<int>{3});
  // A kill waiting for an early start must not hold one back: it would never land.
  CHECK_FALSE(s.pending(5));
  CHECK(s.pending(6));
  s.due(6);
  CHECK(devices(s.armed()) == std::vector<int>{3, 4});  // neither landed yet
  CHECK(devices(s.take(fault_moment::early)) == std::vector<int>{3});
  CHECK(devices(s.armed()) == std::vector<int>{4});
}

TEST_CASE("fault schedule: the first placement's kill is armed before the first step, a resumed run skips what came before",
          "[unit][sim]") {
  const std::vector<fault> plan{at(1, fault_moment::step, 1), at(3, fault_moment::placement, 2), at(3, fault_moment::step, 3),
                                at(5, fault_moment::placement, 4)};
  fault_schedule fresh(plan, 0, 7);
  CHECK(fresh.armed().empty());
  fault_schedule resumed(plan, 3, 7);
  CHECK(devices(resumed.armed()) == std::vector<int>{2});  // before anything of step 3
  auto d = resumed.due(3);
  CHECK(devices(d.now) == std::vector<int>{3});  // step 1's fault belongs to the run resumed from
  CHECK(d.armed.empty());                        // the placement kill is not armed twice
  d = resumed.due(5);
  CHECK(devices(d.armed) == std::vector<int>{4});  // a later placement's (a rollback's) waits as any
  CHECK(devices(resumed.take(fault_moment::placement, 1)) == std::vector<int>{2});
  CHECK(devices(resumed.take(fault_moment::placement)) == std::vector<int>{4});
}

TEST_CASE("fault schedule: injected faults strike now or wait, apart from the plan's", "[unit][sim]") {
  fault_schedule s({}, 0, 7);
  const auto d = s.due(4, {at(0, fault_moment::step, 5), at(0, fault_moment::checkpoint, 6)});
  CHECK(d.now.empty());
  CHECK(devices(d.injected) == std::vector<int>{5});
  CHECK(devices(d.armed) == std::vector<int>{6});
  CHECK(s.waiting(fault_moment::checkpoint));
}

TEST_CASE("fault schedule: its randomness is the seed's", "[unit][sim]") {
  fault_schedule a({}, 0, 11), b({}, 0, 11), c({}, 0, 12);
  std::vector<int> xa, xb, xc;
  for (int k = 0; k < 8; ++k) {
    xa.push_back(a.after_us(0.5)), xb.push_back(b.after_us(0.5)), xc.push_back(c.after_us(0.5));
    CHECK(xa.back() >= 0);
    CHECK(xa.back() < 500000);
    CHECK(a.pick(3) < 3);
    b.pick(3), c.pick(3);
  }
  CHECK(xa == xb);
  CHECK(xa != xc);
  CHECK(a.after_us(0) == 0);
}
