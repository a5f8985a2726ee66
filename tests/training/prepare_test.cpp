// A job file into a run's settings (training/prepare.hpp): speeds scaled to the cores, the
// length from epochs, the controller or the policy's plan, the dynamics, faults and places;
// mistakes are refused by name. References are worked out by hand from the job's numbers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "planner/evaluate.hpp"
#include "support/small_job.hpp"
#include "training/prepare.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

using test_support::base_job;

std::string job_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("dynapar_prep_" + name + "_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << text;
  return p.string();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

}  // namespace

TEST_CASE("a job without a controller: scaled speeds, length from epochs, the policy's plan", "[unit][training]") {
  const auto path = job_file("plain", base_job);
  auto p = training::prepare_job(path, 0);
  REQUIRE(p);
  // One core for 4 devices at 1 : 1/2 : 1/4 : 1/4 of the fastest (sum 2): the fastest at 1/2.
  CHECK(p->scale == Approx(0.5));
  const std::vector<double> want = {0.5, 0.25, 0.125, 0.125};
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(p->cluster.devices[i].speed == Approx(want[i]));
    CHECK(p->settings.emulated.cluster.devices[i].speed == Approx(want[i]));
  }
  const auto& s = p->settings;
  CHECK(s.steps == 2 * (600 / 64));  // 9 whole batches an epoch
  CHECK(s.batch == 64);
  CHECK(s.seed == 7);
  CHECK(s.optimizer.kind == "sgd");
  CHECK(s.optimizer.lr == 0.05);
  CHECK(s.optimizer.momentum == 0.5);
  CHECK_FALSE(s.controller);
  CHECK(s.slot_steps == 10);
  CHECK(s.exact);
  CHECK(p->train_set.size() == 600);
  CHECK(p->test_set.size() == 1000);  // at least 1000 test samples
  REQUIRE(p->profile.num_layers() == model::num_layers(*p->model));
  // dp_even: every device a group of its own with an equal share of the batch.
  REQUIRE(s.plan.groups.size() == 4);
  for (const auto& g : s.plan.groups) CHECK(g.share == 16);
  CHECK(p->reference_place == "cpu");
  fs::remove(path);
}

TEST_CASE("a job with a controller: its budget paced over the run's slots, hysteresis as set", "[unit][training]") {
  const auto path = job_file("online", std::string(base_job) + "replan_every: 4\nhysteresis: false\nbudget: {cost_per_slot: 0.01}\n");
  auto p = training::prepare_job(path, 0);
  REQUIRE(p);
  const auto& s = p->settings;
  REQUIRE(s.controller);
  CHECK(s.controller->policy == "dp_even");
  CHECK(s.controller->replan_every == 4);
  CHECK(s.slot_steps == 4);
  CHECK(s.controller->core.budget.cost_per_slot == 0.01);
  CHECK(s.controller->core.budget.horizon_slots == 5);  // 18 steps in slots of 4: 4 whole and one part
  CHECK_FALSE(s.controller->core.hysteresis);
  CHECK(s.controller->core.cluster.devices.size() == 4);
  // --steps overrides the length, and the horizon follows it.
  auto q = training::prepare_job(path, 41);
  REQUIRE(q);
  CHECK(q->settings.steps == 41);
  CHECK(q->settings.controller->core.budget.horizon_slots == 11);
  fs::remove(path);
}

TEST_CASE("emulation off, a place for every device, and faults expanded from the job", "[unit][training]") {
  const auto path = job_file("real", std::string(base_job) + "replan_every: 3\nfaults:\n  at:\n"
                                                              "    - {step: 5, kind: slow, device: 1, factor: 0.5, steps: 2}\n"
                                                              "    - {step: 9, kind: kill, device: 2}\n");
  auto p = training::prepare_job(path, 0, "cpu");
  REQUIRE(p);
  CHECK_FALSE(p->job.emulate);
  CHECK(p->settings.places.empty());
  for (const auto& d : p->settings.emulated.cluster.devices) CHECK(d.speed == 1);
  REQUIRE(p->settings.faults.size() == 2);
  CHECK(p->settings.faults[0].step == 5);
  CHECK(p->settings.faults[0].kind == sim::fault_kind::slow);
  CHECK(p->settings.faults[0].factor == 0.5);
  CHECK(p->settings.faults[1].step == 9);
  CHECK(p->settings.faults[1].device == 2);
  fs::remove(path);
}

TEST_CASE("a job's mistakes are refused by name", "[unit][training]") {
  const auto error_of = [](const std::string& name, const std::string& text, const std::string& place = "") {
    const auto path = job_file(name, text);
    auto p = training::prepare_job(path, 0, place);
    fs::remove(path);
    return p ? std::string("prepared") : p.err().message;
  };
  CHECK_THAT(error_of("place", base_job, "tpu:0"), Catch::Contains("tpu:0"));
  // A profile of another model: its layer count does not match.
  const fs::path profile = fs::temp_directory_path() / ("dynapar_prep_profile_" + std::to_string(::getpid()) + ".json");
  std::ofstream(profile) << R"({"name": "two", "layers": [
    {"name": "a", "fwd_s": 1e-5, "bwd_s": 2e-5, "param_bytes": 100, "act_bytes": 10},
    {"name": "b", "fwd_s": 1e-5, "bwd_s": 2e-5, "param_bytes": 100, "act_bytes": 10}]})";
  CHECK_THAT(error_of("profile", std::string(base_job) + "profile: " + profile.string() + "\n"),
             Catch::Contains("has 2 layers") && Catch::Contains("model 'mlp'"));
  fs::remove(profile);
  CHECK_THAT(error_of("policy", replaced(base_job, "policy: dp_even", "policy: fastest_ever")), Catch::Contains("fastest_ever"));
  auto missing = training::prepare_job("/nonexistent/job.yaml", 0);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message, Catch::Contains("/nonexistent/job.yaml"));
}

TEST_CASE("the frame cap is twice the job's largest tensor and 16 MiB, at most 1 GiB", "[unit]") {
  planner::model_profile m;
  m.layers.resize(2);
  m.layers[0].param_bytes = 4 << 20;
  m.layers[0].act_bytes = 1000;
  m.layers[1].param_bytes = 60 << 20;
  m.layers[1].act_bytes = 5000;
  // The parameters flattened (64 MiB) outweigh a batch of 256 of the widest activation (1.28 MB).
  CHECK(training::frame_cap_bytes(m, 256, 3136) == 2 * (64 << 20) + (16 << 20));
  // A batch of 65536: the activations (327.68 MB) are the largest.
  CHECK(training::frame_cap_bytes(m, 65536, 3136) == 2 * 5000LL * 65536 + (16 << 20));
  // Samples wider than any activation: the inputs.
  CHECK(training::frame_cap_bytes(m, 65536, 8000) == 2 * 8000LL * 65536 + (16 << 20));
  m.layers[1].param_bytes = 600 << 20;
  CHECK(training::frame_cap_bytes(m, 256, 3136) == std::int64_t{1} << 30);
}
