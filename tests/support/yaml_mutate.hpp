// Seeded mutations of YAML text and the fuzzers' settings, shared by the job-file fuzzers (tests/config/fuzz_test.cpp
// parses each mutant; tests/training/prepare_fuzz_test.cpp prepares it as a run).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace dynapar::test_support {

// A fuzzer's setting from the environment (DYNAPAR_FUZZ_ITERATIONS, DYNAPAR_FUZZ_SEED).
inline long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : fallback;
}

// One mutation of YAML text: bytes flipped, cut, repeated or swapped, tokens that YAML and the
// loaders treat specially, values at the edges of every numeric type.
inline std::string mutate_yaml(std::string s, std::mt19937_64& rng) {
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


}  // namespace dynapar::test_support
