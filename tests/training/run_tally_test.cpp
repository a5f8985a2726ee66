#include <catch2/catch.hpp>

#include "training/run_tally.hpp"

using namespace dynapar;

namespace {

training::step_record step(std::int64_t t, double time_s, double cost, double wait_s, std::vector<int> messages = {}) {
  training::step_record r;
  r.step = t, r.time_s = time_s, r.cost = cost, r.controller_wait_s = wait_s;
  for (const int m : messages) {
    r.stages.emplace_back();
    r.stages.back().messages = m;
  }
  return r;
}

}  // namespace

TEST_CASE("the run's tally: averages over the steps run, the controller's wait over steady steps only, sums by device", "[unit][training]") {
  training::run_tally tally;
  training::train_outcome out;
  control::measurement m0, m1, m2, m3;
  m0.energy_j = {{1, 4.0}};
  m1.links = {{1, 2, 100}, {2, 1, 50}};
  m2.energy_j = {{1, 2.0}, {2, 6.0}};
  m3.links = {{1, 2, 10}};
  tally.committed(step(0, 2.0, 1.0, 0.5), m0, false, 0, out);     // the run's first: not steady
  tally.committed(step(1, 1.0, 0.5, 0.1), m1, true, 0, out);      // re-planned: not steady
  tally.committed(step(2, 1.0, 0.5, 0.2), m2, false, 0, out);     // steady
  tally.committed(step(3, 3.0, 0.5, 0.3, {3, 4}), m3, false, 1, out);  // a retry since: not steady
  out.steps = 4;
  tally.finish(8, {1.0, 3.0}, out);
  // By hand: 7 s over 4 steps of 8 samples, 2.5 of cost, one steady step (0.2 s waited in 1 s).
  CHECK(out.mean_step_time_s == Approx(1.75));
  CHECK(out.samples_per_s == Approx(32.0 / 7.0));
  CHECK(out.avg_cost == Approx(0.625));
  CHECK(out.steady_steps == 1);
  CHECK(out.controller_wait_s == Approx(0.2));
  CHECK(out.controller_wait_share == Approx(0.2));
  CHECK(out.avg_energy_j == std::map<int, double>{{1, 1.5}, {2, 1.5}});
  CHECK(out.data_plane_bytes == std::map<int, double>{{1, 110}, {2, 50}});
  CHECK(out.messages_per_step == 7);  // the last step's
  CHECK(out.mean_recovery_s == Approx(2.0));
  CHECK(out.max_recovery_s == Approx(3.0));
}

TEST_CASE("the run's tally after a resume: only this run's steps, its first not steady, none run none divided", "[unit][training]") {
  training::run_tally tally;
  training::train_outcome out;
  out.resumed_from = 5, out.steps = 7;
  tally.committed(step(5, 4.0, 2.0, 1.0), {}, false, 0, out);
  tally.committed(step(6, 2.0, 1.0, 0.5), {}, false, 0, out);
  tally.finish(10, {}, out);
  CHECK(out.mean_step_time_s == Approx(3.0));
  CHECK(out.samples_per_s == Approx(20.0 / 6.0));
  CHECK(out.steady_steps == 1);
  CHECK(out.controller_wait_share == Approx(0.25));
  CHECK(out.mean_recovery_s == 0);
  training::train_outcome none;
  none.steps = 3, none.resumed_from = 3;
  training::run_tally().finish(10, {}, none);
  CHECK(none.mean_step_time_s == 0);
  CHECK(none.samples_per_s == 0);
  CHECK(none.avg_cost == 0);
}
