// A run driven as a library user would, without the CLI (issue 72): training::run_session with
// the actors' trainer writes the run's outputs, checkpoints and --verify's comparison, and a
// second session checks its layers against the first bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "actors/trainer.hpp"
#include "data/sampler.hpp"
#include "support/small_job.hpp"
#include "training/session.hpp"

using namespace dynapar;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<json> lines(const fs::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string l; std::getline(in, l);) out.push_back(json::parse(l));
  return out;
}

}  // namespace

TEST_CASE("a library drives a run without the CLI: its outputs, checkpoints, verify and verify-against", "[integration][actors]") {
  model::set_threads(1);
  const fs::path dir = fs::temp_directory_path() / ("dynapar_session_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "job.yaml") << test_support::base_job;
  const training::session_trainer here = [](training::prepared_job& p, const training::train_callbacks& cb) {
    return actors::train(*p.model, p.train_set, p.settings, cb);
  };

  auto prepare = [&](std::int64_t steps) { return training::prepare_job((dir / "job.yaml").string(), steps); };
  // A session checked against the first run's layers.
  auto against_first = [&](std::int64_t steps, const std::string& out) {
    auto p = prepare(steps);
    REQUIRE(p);
    training::session_options o;
    o.out = (dir / out).string();
    o.verify_against = (dir / "a").string();
    return std::make_pair(training::run_session(*p, o, here, nullptr), model::num_layers(*p->model));
  };
  auto a = prepare(6);
  REQUIRE(a);
  training::session_options o;
  o.out = (dir / "a").string();
  o.verify = true;
  o.checkpoint_dir = (dir / "cuts").string();
  o.checkpoint_every = 2;
  int steps_seen = 0, plans_seen = 0;
  training::session_watch watch;
  watch.on_step = [&](const training::step_record&) { ++steps_seen; };
  watch.on_plan = [&](const training::plan_record&) { ++plans_seen; };
  auto run = training::run_session(*a, o, here, nullptr, watch);
  REQUIRE(run);
  // The plain device's run (training/verify.hpp) trained the same bits.
  CHECK(run->check.max_rel_diff == 0.0);
  CHECK(run->check.verified());
  CHECK(steps_seen == 6);
  CHECK(plans_seen >= 1);
  const auto metrics = lines(fs::path(o.out) / "metrics.jsonl");
  REQUIRE(metrics.size() == 6);
  for (int t = 0; t < 6; ++t) CHECK(metrics[t]["step"] == t);
  const auto plans = lines(fs::path(o.out) / "plans.jsonl");
  REQUIRE_FALSE(plans.empty());
  CHECK(plans.front()["step"] == 0);
  std::ifstream summary_file(fs::path(o.out) / "summary.json");
  const json summary = json::parse(summary_file);
  CHECK(summary == run->summary);
  CHECK(summary["steps"] == 6);
  CHECK(summary["reference_max_rel_diff"] == 0.0);
  CHECK(summary["checkpoints"] == 3);  // after steps 2, 4 and 6
  CHECK(fs::exists(fs::path(o.out) / training::layer_hashes_file));
  CHECK_FALSE(fs::is_empty(dir / "cuts"));

  // The same job again, checked against the first run's layers; its rollback point (no
  // checkpoint directory) is removed once it ended well.
  const auto [again, layers] = against_first(6, "b");
  REQUIRE(again);
  CHECK(again->layers == static_cast<std::size_t>(layers));
  CHECK(again->layers_differing.empty());
  CHECK_FALSE(fs::exists(dir / "b" / "rollback"));

  // One step fewer is another run: refused before it trains.
  const auto shorter = against_first(5, "c").first;
  REQUIRE_FALSE(shorter);
  CHECK(shorter.err().code == "bad_verify");
  CHECK_FALSE(fs::exists(dir / "c" / "metrics.jsonl"));

  // Options the job cannot take are refused before anything is written.
  training::session_options bad;
  bad.out = (dir / "bad").string();
  bad.compare = {"dp_balanced"};
  auto d = prepare(6);
  REQUIRE(d);
  auto refused = training::run_session(*d, bad, here, nullptr);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == "bad_flag");
  CHECK_FALSE(fs::exists(bad.out));
  fs::remove_all(dir);
}
