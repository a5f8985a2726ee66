// A seeded mutation fuzzer over every example job, cluster and scenario file (docs/TESTING.md):
// each mutant must parse to a value or to an error with a message, never crash, throw or hang.
// DYNAPAR_FUZZ_ITERATIONS (default 1500 a file) and DYNAPAR_FUZZ_SEED make longer runs.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "config/cluster_file.hpp"
#include "config/job_file.hpp"
#include "config/scenario_file.hpp"
#include "support/yaml_mutate.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <class Parse>
void fuzz(const fs::path& dir, Parse parse) {
  const long iterations = test_support::env_or("DYNAPAR_FUZZ_ITERATIONS", 1500);
  std::mt19937_64 rng(static_cast<std::uint64_t>(test_support::env_or("DYNAPAR_FUZZ_SEED", 1)));
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  long parsed = 0, refused = 0;
  for (const auto& f : files) {
    const auto original = read(f);
    for (long i = 0; i < iterations; ++i) {
      const auto text = test_support::mutate_yaml(original, rng);
      YAML::Node doc;
      try {
        doc = YAML::Load(text);
      } catch (const YAML::Exception&) {
        continue;  // not YAML at all: load_yaml_file reports it with line and column
      }
      bool ok = false;
      std::string message;
      try {
        auto r = parse(doc);
        ok = static_cast<bool>(r);
        if (!ok) message = r.err().message;
      } catch (const std::exception& e) {
        FAIL(f.filename().string() << " mutant " << i << " threw " << e.what() << ":\n" << text);
      }
      if (!ok && message.empty()) FAIL(f.filename().string() << " mutant " << i << " was refused without a message:\n" << text);
      (ok ? parsed : refused)++;
    }
  }
  // Both outcomes are exercised: the mutants are neither all broken nor all harmless.
  CHECK(parsed > 0);
  CHECK(refused > 0);
}

const fs::path examples = fs::path(DYNAPAR_SOURCE_DIR) / "examples";

}  // namespace

TEST_CASE("mutated job files parse or are refused with a message", "[fuzz][config]") {
  fuzz(examples / "jobs", [](const YAML::Node& d) { return config::parse_job(d, "fuzz"); });
}

TEST_CASE("mutated cluster files parse or are refused with a message", "[fuzz][config]") {
  fuzz(examples / "clusters", [](const YAML::Node& d) { return config::parse_cluster(d); });
}

TEST_CASE("mutated scenario files parse or are refused with a message", "[fuzz][config]") {
  fuzz(examples / "scenarios", [](const YAML::Node& d) { return config::parse_scenario(d, "fuzz"); });
}
