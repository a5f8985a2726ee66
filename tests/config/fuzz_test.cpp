// A seeded mutation fuzzer over every example job, cluster and scenario file (docs/TESTING.md):
// each mutant must parse to a value or to an error with a message, never crash, throw or hang.
// DYNAPAR_FUZZ_ITERATIONS (default 1500 a file) and DYNAPAR_FUZZ_SEED make longer runs.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "config/cluster_file.hpp"
#include "config/job_file.hpp"
#include "config/scenario_file.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : fallback;
}

// One mutation of YAML text: bytes flipped, cut, repeated or swapped, tokens that YAML and the
// loaders treat specially, values at the edges of every numeric type.
std::string mutate(std::string s, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens = {
      ":", "- ", "[", "]", "{", "}", "&a ", "*a", "!!str ", "!!binary ", "\n", "  ", "\t", "#", "'", "\"", "|", ">", "~",
      "null", "-1", "0", "1e309", "-1e309", ".nan", ".inf", "4294967296", "-2147483649", "99999999999999999999",
      "1e-320", "[]", "{}", "[1, 2", "{id: ", "<<: *a", "\xff\xfe", "?", "%YAML 1.2\n---\n", "---\n", "..."};
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds; ++r) {
    const std::size_t at = pick(s.size() + 1);
    switch (pick(7)) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1:
        s.erase(at, pick(16) + 1);
        break;
      case 2:
        s.insert(at, tokens[pick(tokens.size())]);
        break;
      case 3: {  // a line repeated
        const auto b = s.rfind('\n', at), e = s.find('\n', at);
        const auto from = b == std::string::npos ? 0 : b + 1;
        s.insert(from, s.substr(from, (e == std::string::npos ? s.size() : e + 1) - from));
        break;
      }
      case 4: {  // a number replaced by an edge value
        const auto d = s.find_first_of("0123456789", at);
        if (d == std::string::npos) break;
        const auto end = s.find_first_not_of("0123456789.e-", d);
        s.replace(d, (end == std::string::npos ? s.size() : end) - d, tokens[19 + pick(11)]);
        break;
      }
      case 5:
        s.resize(at);
        break;
      default: {  // two spans swapped
        const std::size_t b = pick(s.size() + 1), n = std::min<std::size_t>(pick(32), s.size() - std::max(at, b));
        if (at + n <= b || b + n <= at)
          for (std::size_t i = 0; i < n; ++i) std::swap(s[at + i], s[b + i]);
      }
    }
  }
  return s;
}

template <class Parse>
void fuzz(const fs::path& dir, Parse parse) {
  const long iterations = env_or("DYNAPAR_FUZZ_ITERATIONS", 1500);
  std::mt19937_64 rng(static_cast<std::uint64_t>(env_or("DYNAPAR_FUZZ_SEED", 1)));
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  long parsed = 0, refused = 0;
  for (const auto& f : files) {
    const auto original = read(f);
    for (long i = 0; i < iterations; ++i) {
      const auto text = mutate(original, rng);
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
