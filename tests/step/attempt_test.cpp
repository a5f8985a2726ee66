// One attempt at a step (runtime/step/attempt.hpp) fed synthetic event times: the dispatch it
// decides against a split worked out by hand, the sums it starts, and what it measured.
#include <catch2/catch.hpp>

#include "step/attempt.hpp"
#include "step/groups.hpp"

using namespace dynapar;
using step_test::group;

namespace {

// Two single-device groups (devices 0 and 1, 12 samples each) and a pipeline (2, 3; 8).
planner::plan three_groups() {
  planner::plan p;
  p.groups = {group({0}, 12, 4), group({1}, 12, 4), group({2, 3}, 8, 4)};
  return p;
}

}  // namespace

TEST_CASE("attempt: the first probe to end decides the rests, by the paces the probes showed", "[unit][step]") {
  const auto p = three_groups();
  schedule::pace_noise paces;
  step::attempt at(1, p, step::make_layout(p, 32, {true, 1.0 / 3, false}), paces, {3, true});
  for (const auto& s : at.shape().opening) at.sent(s.group, 0);
  // Probes of 4 samples. Device 1's first forward (4 samples) took 10 ms: 7.5 ms a sample for
  // forward and backward, so its probe ends at 30 ms. Device 0's probe ends at 12 ms: 3 ms a
  // sample. The pool's 16 samples by hand: 12 + 3a ms against 30 + 7.5 (16 - a) ms, least
  // makespan at a = 13 (51 and 52.5 ms; a = 14 gives 54).
  CHECK(at.interim(0, 1, 0.004, 0.004).empty());
  CHECK(at.interim(1, 1, 0.010, 0.010).empty());
  CHECK(at.interim(7, 2, 0.001, 0.011).empty());  // not a probing device
  const auto rests = at.interim(0, 2, 0.012, 0.012);
  REQUIRE(rests.size() == 2);
  CHECK(rests[0].group == 0);
  CHECK(rests[0].lo == 16);
  CHECK(rests[0].hi == 29);
  CHECK(rests[1].group == 1);
  CHECK(rests[1].lo == 29);
  CHECK(rests[1].hi == 32);
  CHECK(rests[1].first_micro == 4 + 13);
  CHECK(at.interim(1, 2, 0.030, 0.030).empty());  // decided once
  // Sums start at each stage's end (overlap on); every stage ended: every sum under way.
  CHECK(at.stage_done(2, 0.020) == std::vector<int>{2});
  CHECK(at.stage_done(3, 0.021) == std::vector<int>{3});
  CHECK(!at.all_stages_done());
  CHECK(at.group_done(1.5, 0.021, {{2, 0.015, 0.001, 4, {{2, 3, 100, 0.002, 4}}}, {3, 0.016, 0.002, 4, {}}}, 0.022).empty());
  CHECK(at.stage_done(1, 0.040) == std::vector<int>{1});
  CHECK(at.stage_done(0, 0.051) == std::vector<int>{0});
  CHECK(at.all_stages_done());
  CHECK(at.group_done(2.0, 0.040, {{1, 0.040, 0, 0, {}}}, 0.041).empty());
  CHECK(!at.pipelines_done());
  CHECK(at.group_done(4.0, 0.051, {{0, 0.051, 0, 0, {}}}, 0.052).empty());
  CHECK(at.pipelines_done());
  CHECK(at.pipelines_s() == 0.052);
  CHECK(at.pipeline_s() == 0.051);
  CHECK(at.loss_sum() == 7.5);
  CHECK(at.ready_by_stage() == std::vector<std::vector<double>>{{0.051}, {0.040}, {0.020, 0.021}});
  // The measurement: a dispatched device with what it ran in all (probe and rest), in
  // micro-batches of 4; the pipeline's stages with their shares; the links as reported.
  const auto m = at.measure();
  REQUIRE(m.stages.size() == 4);
  CHECK(m.stages[0].device == 0);
  CHECK(m.stages[0].samples == 17);
  CHECK(m.stages[0].micro_batches == 1 + 4);
  CHECK(m.stages[0].compute_s == 0.051);
  CHECK(m.stages[1].samples == 7);
  CHECK(m.stages[1].micro_batches == 1 + 1);
  CHECK(m.stages[2].samples == 8);
  CHECK(m.stages[3].first_layer == 1);
  REQUIRE(m.links.size() == 1);
  CHECK(m.links[0].bytes == 100);
  const auto times = at.stage_times();
  REQUIRE(times.size() == 4);
  CHECK(times[0].device == 2);  // in the order the groups reported
  CHECK(times[0].wait_s == 0.001);
  CHECK(times[3].device == 0);
  CHECK(times[3].samples == 17);
  // What the probes foretold: device 0's probe 3 ms a sample, its rest (51 - 12) / 13 ms;
  // device 1's probe 30 / 4, its rest (40 - 30) / 3.
  at.teach(paces);
  CHECK(paces.prior(0) == Approx(0.003));
  CHECK(paces.prior(1) == Approx(0.010 / 3));
  CHECK(paces.prior(2) == -1);
}

TEST_CASE("attempt: probes noted together decide once, as the simulator feeds them", "[unit][step]") {
  const auto p = three_groups();
  step::attempt at(1, p, step::make_layout(p, 32, {true, 1.0 / 3, false}), schedule::pace_noise{}, {3, true});
  // Devices 0 and 1 at one pace (3 ms a sample), their probes ending together at 12 ms: the
  // pool's 16 samples by hand, 8 each (12 + 3a against 12 + 3 (16 - a)).
  for (int d : {0, 1}) at.note(d, 1, 0.004, 0.004);
  for (int d : {0, 1}) at.note(d, 2, 0.012, 0.012);
  CHECK(at.rests() == std::vector<int>{-1, -1, -1});  // noted, not decided
  const auto rests = at.decide(0.012);
  REQUIRE(rests.size() == 2);
  CHECK((rests[0].lo == 16 && rests[0].hi == 24 && rests[1].lo == 24 && rests[1].hi == 32));
  CHECK(at.rests() == std::vector<int>{8, 8, -1});
  CHECK(at.decide(0.02).empty());  // decided once
  CHECK(at.interim(1, 2, 0.012, 0.012).empty());
}

TEST_CASE("attempt without overlap: the sums start once the last group ended, for every stage heard", "[unit][step]") {
  const auto p = three_groups();
  schedule::pace_noise paces;
  step::attempt at(1, p, step::make_layout(p, 32, {}), paces, {3, false});
  CHECK(at.shape().probe == std::vector<int>{0, 0, 0});
  CHECK(at.stage_done(0, 0.01).empty());
  CHECK(at.stage_done(2, 0.02).empty());
  CHECK(at.group_done(1, 0.01, {{0, 0.01, 0, 0, {}}}, 0.011).empty());
  CHECK(at.stage_done(1, 0.03).empty());
  CHECK(at.group_done(1, 0.03, {{1, 0.03, 0, 0, {}}}, 0.031).empty());
  CHECK(at.stage_done(3, 0.04).empty());
  CHECK(at.group_done(1, 0.04, {{2, 0.02, 0, 0, {}}, {3, 0.03, 0, 0, {}}}, 0.041) == std::vector<int>{0, 1, 2, 3});
  const auto m = at.measure();
  REQUIRE(m.stages.size() == 4);
  CHECK(m.stages[0].samples == 12);  // not dispatched: its share
  CHECK(m.stages[0].micro_batches == 3);
  at.teach(paces);
  CHECK(paces.prior(0) == -1);  // no probe, nothing learnt
}

TEST_CASE("attempt's apply phase: it commits once the pipelines and sums are done, and counts each holder's confirmation", "[unit][step]") {
  const auto p = three_groups();
  schedule::pace_noise paces;
  step::attempt at(7, p, step::make_layout(p, 32, {}), paces, {3, true});
  at.sum_held(2, 100);
  at.sum_held(2, 50);
  at.sum_held(3, 10);
  CHECK(at.sum_bytes() == std::map<int, double>{{2, 150}, {3, 10}});
  CHECK_FALSE(at.may_commit(true));  // no pipeline has ended
  at.group_done(1, 0.01, {{0, 0.01, 0, 0, {}}}, 0.01);
  at.group_done(1, 0.02, {{1, 0.02, 0, 0, {}}}, 0.02);
  at.group_done(1, 0.03, {{2, 0.02, 0, 0, {}}, {3, 0.03, 0, 0, {}}}, 0.03);
  CHECK_FALSE(at.may_commit(false));  // a sum still under way
  REQUIRE(at.may_commit(true));
  CHECK_FALSE(at.applied(0, 7, 0));  // nothing counts before the commit
  // Layers 0 and 1 held by devices 0, 1, 2 (layer 1 also by 3); 0 and 1 summed as one bucket.
  const std::map<int, std::vector<int>> holders{{0, {0, 1, 2}}, {1, {0, 1, 3}}};
  at.commit({{0, {0, 1}}});
  CHECK(at.committed());
  CHECK_FALSE(at.may_commit(true));  // once
  const auto all = [](int) { return true; };
  CHECK(at.unconfirmed(holders, all) == std::set<int>{0, 1, 2, 3});
  CHECK(at.applied(0, 7, 0));        // the bucket: layers 0 and 1
  CHECK_FALSE(at.applied(0, 7, 0));  // a repeat
  CHECK_FALSE(at.applied(1, 6, 0));  // an earlier attempt's
  CHECK(at.applied(1, 7, 0));
  CHECK(at.applied(2, 7, 0));
  CHECK(at.unconfirmed(holders, all) == std::set<int>{3});
  CHECK(at.unconfirmed(holders, [](int id) { return id != 3; }).empty());  // 3 left the run
}
