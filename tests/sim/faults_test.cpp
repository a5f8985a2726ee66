// Fault plans: listed faults kept, random ones drawn in range, in step order, reproducible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "sim/chaos.hpp"
#include "sim/faults.hpp"

using namespace dynapar;

TEST_CASE("a fault plan expands to its listed faults and seeded random ones, in step order", "[unit][sim]") {
  sim::fault_plan p;
  p.at.push_back({30, sim::fault_kind::pause, 2, 1, 0, 4});
  p.at.push_back({5, sim::fault_kind::slow, 1, 0.5, 10, 0});
  p.random.kills = 40;
  p.random.pauses = 3;
  p.random.from_step = 10;
  p.random.to_step = 20;
  const auto a = sim::expand(p, 100, 7);
  REQUIRE(a.size() == 45);
  CHECK(std::is_sorted(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.step < y.step; }));
  CHECK(a.front().kind == sim::fault_kind::slow);  // step 5, listed
  int kills = 0, pauses = 0;
  std::vector<std::int64_t> steps;
  for (const auto& f : a) {
    if (f.kind == sim::fault_kind::kill) ++kills, steps.push_back(f.step);
    if (f.kind == sim::fault_kind::pause && f.device == -1) ++pauses;
  }
  CHECK(kills == 40);
  CHECK(pauses == 3);
  CHECK(*std::min_element(steps.begin(), steps.end()) >= 10);
  CHECK(*std::max_element(steps.begin(), steps.end()) <= 20);
  // 40 draws from 11 steps spread out: more than a few distinct steps.
  std::sort(steps.begin(), steps.end());
  CHECK(std::unique(steps.begin(), steps.end()) - steps.begin() >= 6);
  // The same seed, the same experiment; another seed (the job's, or the plan's own), another.
  auto same = sim::expand(p, 100, 7);
  auto step_list = [](const std::vector<sim::fault>& v) {
    std::vector<std::int64_t> s;
    for (const auto& f : v) s.push_back(f.step);
    return s;
  };
  CHECK(step_list(same) == step_list(a));
  CHECK(step_list(sim::expand(p, 100, 8)) != step_list(a));
  p.seed = 99;
  CHECK(step_list(sim::expand(p, 100, 7)) == step_list(sim::expand(p, 100, 8)));  // the plan's seed wins
  // A range past the run's end is cut to it; a run shorter than from_step draws nothing.
  p.random.to_step = -1;
  for (const auto& f : sim::expand(p, 15, 7))
    if (f.device == -1) CHECK(f.step < 15);
  CHECK(sim::expand(p, 5, 7).size() == 2);  // the listed ones only
}

TEST_CASE("a chaos experiment is a pure function of its seed, within the run", "[unit][sim]") {
  sim::chaos_config c;
  c.steps = 60;
  c.slot_steps = 5;
  c.devices = {0, 1, 2, 3};
  int restarts = 0, leaves = 0, doubles = 0, kinds[5] = {0, 0, 0, 0, 0}, moments[10] = {};
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const auto a = sim::draw_chaos(c, seed), b = sim::draw_chaos(c, seed);
    REQUIRE(a.describe() == b.describe());
    REQUIRE(a.faults.size() == b.faults.size());
    for (std::size_t i = 0; i < a.faults.size(); ++i) {
      CHECK(a.faults[i].step == b.faults[i].step);
      CHECK(a.faults[i].step >= (a.faults[i].moment == sim::fault_moment::placement ? 0 : 2));
      CHECK(a.faults[i].step < c.steps - 2);
      if (i > 0) CHECK(a.faults[i - 1].step <= a.faults[i].step);
      ++kinds[static_cast<int>(a.faults[i].kind)];
      ++moments[static_cast<int>(a.faults[i].moment)];
      if (a.faults[i].moment != sim::fault_moment::step) CHECK(a.faults[i].kind == sim::fault_kind::kill);
    }
    std::map<std::int64_t, int> kills_at;
    for (const auto& f : a.faults)
      if (f.kind == sim::fault_kind::kill) ++kills_at[f.step];
    for (const auto& [at, n] : kills_at) doubles += n >= 2;
    if (!a.events.empty()) {
      ++leaves;
      REQUIRE(a.events.size() == 2);
      CHECK(a.events[0].kind == sim::event_kind::leave);
      CHECK(a.events[1].kind == sim::event_kind::join);
      CHECK(a.events[0].device == a.events[1].device);
      CHECK(a.events[0].slot < a.events[1].slot);
      CHECK(a.events[1].slot < c.steps / c.slot_steps);
    }
    if (a.restart_after >= 0) {
      ++restarts;
      CHECK(a.restart_after < c.steps);
    }
  }
  // Over 400 seeds every ingredient shows up, and not always.
  CHECK(restarts > 40);
  CHECK(restarts < 360);
  CHECK(leaves > 40);
  CHECK(leaves < 360);
  for (int k = 0; k < 4; ++k) CHECK(kinds[k] > 20);
  CHECK(kinds[4] == 0);  // no corruption: a chaos run must stay exact
  // Kills land on every hard moment, and some runs lose two devices in one step.
  // Every moment the draw uses (sim::draw_chaos), step included: all of them.
  for (int m = 0; m < 10; ++m) CHECK(moments[m] > 10);
  CHECK(doubles > 20);
  c.hard_moments = false;
  for (std::uint64_t seed = 1; seed <= 50; ++seed)
    for (const auto& f : sim::draw_chaos(c, seed).faults) CHECK(f.moment == sim::fault_moment::step);
  CHECK(sim::draw_chaos(c, 1).describe() != sim::draw_chaos(c, 2).describe());
}
