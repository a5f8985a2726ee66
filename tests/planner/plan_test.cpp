// planner::validate: a plan from a job file or the controller is checked alone, each failure
// naming the field (the cases once checked through the wire's Plan message, which is gone).
#include <catch2/catch.hpp>

#include "planner/plan.hpp"

using namespace dynapar;

namespace {
// Ten layers, batch 64: devices 1 and 2 pipelined over 40 samples, device 3 alone over 24.
planner::plan good_plan() {
  planner::plan p;
  p.groups.push_back({{1, 2}, {0, 5, 10}, 40, 8});
  p.groups.push_back({{3}, {0, 10}, 24, 8});
  return p;
}
std::string message_of(const planner::plan& p, const std::vector<int>& known = {}) {
  auto st = planner::validate(p, 10, 64, known);
  return st ? "" : st.err().code + ": " + st.err().message;
}
}  // namespace

TEST_CASE("a plan is checked alone, each mistake named", "[unit]") {
  REQUIRE(message_of(good_plan()).empty());
  auto p = good_plan();
  p.groups[0].splits = {0, 7, 5, 10};
  p.groups[0].devices = {1, 2, 4};
  CHECK(message_of(p) == "bad_plan: plan.groups[0].splits must be strictly increasing (index 2)");
  p = good_plan();
  p.groups[1].splits = {0, 11};
  CHECK(message_of(p).find("layer count 10") != std::string::npos);
  p = good_plan();
  p.groups[1].share = 23;
  CHECK(message_of(p) == "bad_plan: plan.groups shares sum to 63, not the batch 64");
  p = good_plan();
  p.groups[1].devices = {2};
  CHECK(message_of(p).find("repeats device id 2") != std::string::npos);
  p = good_plan();
  p.groups[1].micro_batch = 0;
  CHECK(message_of(p).find("plan.groups[1].micro_batch") != std::string::npos);
  CHECK(message_of(good_plan(), {1, 2}).find("unknown device id 3") != std::string::npos);
  CHECK(message_of(planner::plan{}) == "bad_plan: plan.groups is empty");
}
