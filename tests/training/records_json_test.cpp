// The records as metrics.jsonl, plans.jsonl and summary.json (docs/FORMATS.md): every field
// the format names, with the record's value; totals and keys as the format defines them.
#include <catch2/catch.hpp>

#include "training/records_json.hpp"

using namespace dynapar;

TEST_CASE("a step, a plan and a fault as their JSON lines", "[unit][training]") {
  training::step_record r;
  r.step = 12;
  r.loss = 0.5;
  r.time_s = 0.25;
  r.pipeline_s = 0.125;
  r.sync_s = 0.0625;
  r.migration_s = 0.03125;
  r.cost = 2;
  r.stages = {{3, 0.1, 0.02, 4, {}, 0, 0, 0}};
  const auto s = training::step_json(r);
  CHECK(s.at("step") == 12);
  CHECK(s.at("loss") == 0.5);
  CHECK(s.at("time_s") == 0.25);
  CHECK(s.at("pipeline_s") == 0.125);
  CHECK(s.at("sync_s") == 0.0625);
  CHECK(s.at("migration_s") == 0.03125);
  CHECK(s.at("cost") == 2);
  REQUIRE(s.at("stages").size() == 1);
  CHECK(s.at("stages")[0].at("device") == 3);
  CHECK(s.at("stages")[0].at("messages") == 4);
  CHECK_FALSE(s.contains("event"));  // steps and faults share metrics.jsonl, told apart by "event"

  training::plan_record p;
  p.step = 20;
  p.slot = 2;
  p.plan.groups = {{{0, 1}, {0, 3, 6}, 48, 16}, {{2}, {0, 6}, 16, 16}};
  p.reason = "device 2 joined";
  p.layers_moved = 3;
  p.joined = {2};
  const auto j = training::plan_json(p);
  CHECK(j.at("step") == 20);
  CHECK(j.at("slot") == 2);
  CHECK(j.at("reason") == "device 2 joined");
  CHECK(j.at("layers_moved") == 3);
  CHECK(j.at("joined") == std::vector<int>{2});
  CHECK(j.at("describe") == planner::describe(p.plan));
  REQUIRE(j.at("plan").at("groups").size() == 2);

  training::fault_record f{7, "injected", "kill", 1, "plan", "at step 7", 0};
  const auto fj = training::fault_json(f);
  CHECK(fj.at("event") == "injected");
  CHECK(fj.at("kind") == "kill");
  CHECK(fj.at("device") == 1);
  CHECK(fj.at("step") == 7);
}

TEST_CASE("summary.json: the outcome, the job's budgets, the controller's tensor bytes summed", "[unit][training]") {
  config::job job;
  job.name = "sum";
  job.model = "cnn";
  job.cluster.budget.cost_per_slot = 0.0125;
  job.cluster.budget.energy_per_slot = {{1, 30}};
  training::train_outcome o;
  o.steps = 10;
  o.mean_step_time_s = 0.2;
  o.ledger.lost = 0;
  o.ledger.duplicated = 2;
  o.avg_energy_j = {{1, 28.5}};
  o.data_plane_bytes = {{0, 1e6}, {1, 2e6}};
  const auto s = training::summary_json(job, 64, o, {{}, 0.8, "accuracy", 0.5, 3, {2496, 64, 0.25}});
  CHECK(s.at("job") == "sum");
  CHECK(s.at("batch") == 64);
  CHECK(s.at("final_test_accuracy") == 0.8);
  CHECK(s.at("emulation_scale") == 0.5);
  CHECK(s.at("samples_duplicated") == 2);
  CHECK(s.at("budget") == 0.0125);
  CHECK(s.at("energy_budget_j").at("1") == 30);
  CHECK(s.at("avg_energy_j").at("1") == 28.5);
  CHECK(s.at("data_plane_bytes").at("1") == 2e6);
  CHECK((s.at("samples_read_ahead") == 2496 && s.at("samples_decoded_when_read") == 64 && s.at("data_wait_s") == 0.25));
  CHECK_FALSE(s.contains("controller_tensor_bytes"));  // one process: nothing passes a controller

  job.cluster.budget = {};
  o.controller_tensor_bytes = {{"activations", 300}, {"layers", 100}};
  const auto t = training::summary_json(job, 64, o, {});
  CHECK(t.at("budget").is_null());
  CHECK(t.at("controller_tensor_bytes") == 400);
  CHECK(t.at("controller_tensor_bytes_per_step") == 40);
  CHECK(t.at("controller_tensor_bytes_by_kind").at("layers") == 100);
}
