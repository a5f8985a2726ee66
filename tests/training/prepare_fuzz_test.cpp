// Mutated job files through the whole preparation of a run (training::prepare_job: the
// parsing, the data, the model and its profile, the plan or the controller, the dynamics and
// faults), not only the parser: each mutant prepares or is refused with a message, and never
// crashes, throws or allocates without bound. The ASan + UBSan build runs it too.
// DYNAPAR_FUZZ_ITERATIONS (default 150 a job) and DYNAPAR_FUZZ_SEED make longer runs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "support/small_job.hpp"
#include "support/yaml_mutate.hpp"
#include "training/prepare.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

// Small jobs (synthetic data, the MLP), so that a mutant prepares in milliseconds: the
// training tests' fixed-plan job, and the controller with a budget, dynamics and faults.
const char* const jobs[] = {test_support::base_job,
                            R"(name: controlled
model: mlp
data: {kind: synthetic}
synthetic_samples: 800
batch: 32
micro_batch: 8
steps: 12
schedule: 1f1b
optimizer: {kind: adam, lr: 0.002, schedule: {kind: cosine, warmup_steps: 2}}
policy: joint_lyapunov
replan_every: 2
emulate_cores: 1.5
budget: {cost_per_slot: 0.0125}
links:
  same_node: {bandwidth_gbps: 80, latency_us: 10}
devices:
  - {id: 0, speed: 4, memory_gb: 4, price_per_hour: 360, node: 0}
  - {id: 1, speed: 1, count: 2, memory_gb: 4, price_per_hour: 36, node: 1}
dynamics:
  traces:
    - {device: 1, speed: [[0, 1.0], [5, 0.25]]}
  events:
    - {slot: 3, kind: leave, device: 0}
faults:
  seed: 3
  at:
    - {step: 4, kind: kill, device: 2}
    - {step: 6, kind: slow, device: 1, factor: 0.5, steps: 2}
)"};

}  // namespace

TEST_CASE("mutated job files prepare as a run or are refused with a message", "[fuzz][training]") {
  const long iterations = test_support::env_or("DYNAPAR_FUZZ_ITERATIONS", 150);
  std::mt19937_64 rng(static_cast<std::uint64_t>(test_support::env_or("DYNAPAR_FUZZ_SEED", 1)));
  const fs::path path = fs::temp_directory_path() / ("dynapar_prepare_fuzz_" + std::to_string(::getpid()) + ".yaml");
  for (const char* job : jobs) {
    std::ofstream(path) << job;
    const auto base = training::prepare_job(path.string(), 0);
    INFO(job << (base ? "" : "refused: " + base.err().message));
    REQUIRE(base);  // the unmutated job prepares, so refusals below are the mutations'
    long prepared = 0, refused = 0;
    for (long i = 0; i < iterations; ++i) {
      const auto text = test_support::mutate_yaml(job, rng);
      std::ofstream(path, std::ios::trunc) << text;
      std::string message;
      bool ok = false;
      try {
        auto p = training::prepare_job(path.string(), 0);
        ok = static_cast<bool>(p);
        if (!ok) message = p.err().message;
      } catch (const std::exception& e) {
        FAIL("mutant " << i << " threw " << e.what() << ":\n" << text);
      }
      if (!ok && message.empty()) FAIL("mutant " << i << " was refused without a message:\n" << text);
      (ok ? prepared : refused)++;
    }
    CHECK(prepared > 0);
    CHECK(refused > 0);
  }
  fs::remove(path);
}
