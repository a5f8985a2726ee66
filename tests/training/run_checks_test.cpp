#include <catch2/catch.hpp>

#include "training/run_checks.hpp"

using namespace dynapar;

namespace {

std::string refusal(const training::train_settings& s, int samples = 640, int layers = 4) {
  const auto st = training::check_run(s, samples, layers);
  return st ? "" : st.err().message;
}

}  // namespace

TEST_CASE("a run's settings are checked before its first step, each refusal naming what is wrong", "[unit][training]") {
  training::train_settings s;  // batch 64, 100 steps
  CHECK(refusal(s).empty());
  CHECK(refusal(s, 63) == "the data set has fewer samples than one batch");
  CHECK(refusal(s, 64).empty());
  auto slot = s;
  slot.slot_steps = 0;
  CHECK(refusal(slot) == "slot_steps must be >= 1");
  auto replan = s;
  replan.replans.push_back({5, planner::plan{}});  // no group: not a plan of this model
  CHECK(refusal(replan).rfind("re-plan before step 5: ", 0) == 0);
  auto every = s;
  every.controller.emplace().replan_every = 0;
  CHECK(refusal(every) == "replan_every must be >= 1");
  auto timed = s;
  timed.profile_timed = true;
  CHECK(refusal(timed) == "profile-timed emulation needs the model's profile");
  auto resume = s;
  resume.resume.emplace().shards.resize(3);
  CHECK(refusal(resume) == "the checkpoint has 3 layers, the model 4");
  resume.resume->shards.resize(4);
  CHECK(refusal(resume).empty());
  resume.resume->step = 101;
  CHECK(refusal(resume) == "the checkpoint is at step 101, the job has 100 steps");
  resume.resume->step = 100;  // at the end: nothing left to run, not an error
  CHECK(refusal(resume).empty());
}
