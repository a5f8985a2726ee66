// --verify's plain-device run: parameters trained on one device over the job's samples and
// micro-batches pass; one step fewer, untrained layers or a NaN fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "data/sampler.hpp"
#include "training/verify.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

const char* job_text = R"(name: verify
model: mlp
data: synthetic
synthetic_samples: 512
batch: 64
micro_batch: 16
steps: 3
optimizer: {kind: adam, lr: 0.01}
policy: dp_even
seed: 11
emulate_cores: 1
devices:
  - {id: 0, speed: 2, memory_gb: 4, price_per_hour: 1, node: 0}
  - {id: 1, speed: 1, memory_gb: 4, price_per_hour: 1, node: 0}
)";

// What a plain device trains in `steps` steps, written out here from the job's numbers.
std::vector<model::layer_copy> plain_run(const training::prepared_job& p, std::int64_t steps) {
  model::reference ref(*p.model, p.settings.optimizer);
  data::global_sampler sampler(512, 64, 11);
  for (std::int64_t t = 0; t < steps; ++t) ref.step(p.train_set, sampler.step_samples(t), 16);
  return ref.layers();
}

}  // namespace

TEST_CASE("the plain device's run is the job's samples, micro-batches and length", "[unit][training]") {
  model::set_threads(1);
  const fs::path path = fs::temp_directory_path() / ("dynapar_verify_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << job_text;
  auto p = training::prepare_job(path.string(), 0);
  fs::remove(path);
  REQUIRE(p);
  REQUIRE(p->settings.steps == 3);

  const auto same = training::check_against_reference(*p, 3, plain_run(*p, 3));
  CHECK(same.max_rel_diff == 0.0);
  CHECK(same.verified());
  CHECK(same.tolerance == p->job.verify_tolerance);
  CHECK(same.reference_accuracy > 0.0);

  const auto short_run = training::check_against_reference(*p, 3, plain_run(*p, 2));
  CHECK(short_run.max_rel_diff > 0.0);
  CHECK_FALSE(short_run.verified());

  std::vector<model::layer_copy> fresh;
  for (int l = 0; l < model::num_layers(*p->model); ++l) fresh.push_back(model::copy_layer(*p->model, l));
  CHECK_FALSE(training::check_against_reference(*p, 3, fresh).verified());

  // Every replica's whole state against the plain device's: one replica of one layer two
  // steps behind is caught by name, though the replica compared value by value is right.
  const auto good = model::state_hashes(plain_run(*p, 3)), behind = model::state_hashes(plain_run(*p, 2));
  std::vector<std::vector<training::train_outcome::replica_hash>> replicas;
  for (std::size_t l = 0; l < good.size(); ++l) replicas.push_back({{0, "cpu", good[l]}, {1, "cpu", good[l]}});
  const auto all_same = training::check_against_reference(*p, 3, plain_run(*p, 3), replicas);
  CHECK(all_same.verified());
  CHECK(all_same.replicas_checked == static_cast<int>(2 * good.size()));
  replicas.back()[1].hash = behind.back();
  const auto one_off = training::check_against_reference(*p, 3, plain_run(*p, 3), replicas);
  CHECK(one_off.max_rel_diff == 0.0);
  CHECK_FALSE(one_off.verified());
  REQUIRE(one_off.replicas_differing.size() == 1);
  CHECK(one_off.replicas_differing.front().find("on device 1") != std::string::npos);
  // A replica on another place (a GPU) agrees only to rounding: not compared by hash.
  replicas.back()[1].place = "cuda:0";
  CHECK(training::check_against_reference(*p, 3, plain_run(*p, 3), replicas).verified());

  training::reference_check nan_run;
  nan_run.max_rel_diff = std::nan("");
  nan_run.tolerance = 1;
  CHECK_FALSE(nan_run.verified());
}
