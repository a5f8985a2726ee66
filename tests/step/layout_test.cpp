// A step's layout (runtime/step/layout.hpp) against slices worked out by hand, and a brute-force
// check that every sample and every micro-batch number is used exactly once.
#include <catch2/catch.hpp>

#include <random>

#include "step/groups.hpp"
#include "step/layout.hpp"

using namespace dynapar;
using step_test::group;

namespace {

void check_slice(const step::slice& s, std::size_t g, int lo, int hi, std::int64_t first, bool more) {
  CHECK(s.group == g);
  CHECK(s.lo == lo);
  CHECK(s.hi == hi);
  CHECK(s.first_micro == first);
  CHECK(s.more == more);
}

}  // namespace

TEST_CASE("layout without dispatch: the groups' shares in order, micro-batches numbered on", "[unit][step]") {
  planner::plan p;
  p.groups = {group({0}, 8, 4), group({1, 2}, 12, 3), group({3}, 4, 2)};
  const auto l = step::make_layout(p, 24, {});
  REQUIRE(l.opening.size() == 3);
  check_slice(l.opening[0], 0, 0, 8, 0, false);   // 2 micro-batches of 4
  check_slice(l.opening[1], 1, 8, 20, 2, false);  // 4 of 3
  check_slice(l.opening[2], 2, 20, 24, 6, false); // 2 of 2
  CHECK(l.micro_batches == 8);
  CHECK(l.pool == 0);
  CHECK(l.unit == 1);
  CHECK(l.probe == std::vector<int>{0, 0, 0});
}

TEST_CASE("layout with dispatch: probes first, then the other shares, then the pool by sample", "[unit][step]") {
  planner::plan p;
  p.groups = {group({0}, 12, 4), group({1}, 12, 4), group({2, 3}, 8, 4)};
  const auto l = step::make_layout(p, 32, {true, 1.0 / 3, false});
  CHECK(l.unit == 1);
  CHECK(l.probe == std::vector<int>{4, 4, 0});  // a third of 12; the pipeline takes no part
  REQUIRE(l.opening.size() == 3);
  check_slice(l.opening[0], 0, 0, 4, 0, true);
  check_slice(l.opening[1], 1, 4, 8, 1, true);
  check_slice(l.opening[2], 2, 8, 16, 2, false);
  CHECK(l.pool == 16);
  CHECK(l.pool_at == 16);
  CHECK(l.pool_micro == 4);
  CHECK(l.micro_batches == 4 + 16);  // the pool's unit is one sample
  const auto rest = step::rest_slices(l, {10, 6, -1});
  REQUIRE(rest.size() == 2);
  check_slice(rest[0], 0, 16, 26, 4, false);
  check_slice(rest[1], 1, 26, 32, 14, false);
  // A rest of nothing is still a task (the device waits for it), and takes no pool.
  const auto none = step::rest_slices(l, {16, 0, -1});
  REQUIRE(none.size() == 2);
  check_slice(none[1], 1, 32, 32, 20, false);
  CHECK(step::dispatched_micro_batches(4, 10, 4) == 1 + 3);
}

TEST_CASE("layout of an exact job: the unit is a micro-batch, and only groups of that size probe", "[unit][step]") {
  planner::plan p;
  p.groups = {group({0}, 16, 4), group({1}, 8, 2), group({2}, 8, 4)};
  const auto l = step::make_layout(p, 32, {true, 0.25, true});
  CHECK(l.unit == 4);
  // 16 = 4 units: a quarter is 1 unit; 8 = 2 units: a quarter rounds to 0, at least 1 unit.
  CHECK(l.probe == std::vector<int>{4, 0, 4});
  REQUIRE(l.opening.size() == 3);
  check_slice(l.opening[0], 0, 0, 4, 0, true);
  check_slice(l.opening[1], 2, 4, 8, 1, true);
  check_slice(l.opening[2], 1, 8, 16, 2, false);  // 4 micro-batches of 2
  CHECK(l.pool == 16);
  CHECK(l.pool_micro == 6);
  CHECK(l.micro_batches == 6 + 4);
  const auto rest = step::rest_slices(l, {12, -1, 4});
  REQUIRE(rest.size() == 2);
  check_slice(rest[0], 0, 16, 28, 6, false);
  check_slice(rest[1], 2, 28, 32, 9, false);
}

TEST_CASE("layout: one group that could probe alone does not (nobody to hand work to)", "[unit][step]") {
  planner::plan p;
  p.groups = {group({0}, 12, 4), group({1, 2}, 12, 4)};
  const auto l = step::make_layout(p, 24, {true, 0.5, false});
  CHECK(l.probe == std::vector<int>{0, 0});
  CHECK(l.pool == 0);
  CHECK(l.micro_batches == 6);
}

TEST_CASE("layout of an exact job: every sample once, every micro-batch number once, in sample order", "[unit][step]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int micro = 1 + static_cast<int>(rng() % 4);
    planner::plan p;
    int batch = 0, id = 0;
    const int G = 1 + static_cast<int>(rng() % 5);
    for (int g = 0; g < G; ++g) {
      const int share = micro * static_cast<int>(1 + rng() % 6);
      std::vector<int> devices(1 + (rng() % 3 == 0 ? 1 : 0));
      for (int& d : devices) d = id++;
      p.groups.push_back(group(devices, share, micro));
      batch += share;
    }
    const auto l = step::make_layout(p, batch, {true, 0.3, true});
    std::vector<int> rest(G, -1);
    int left = l.pool;
    for (int g = 0; g < G; ++g)  // any split of the pool in whole units
      if (l.probes(static_cast<std::size_t>(g))) {
        const int units = (left + micro - 1) / micro;
        rest[g] = std::min(left, micro * static_cast<int>(rng() % (units + 1)));
        left -= rest[g];
      }
    for (int g = G - 1; g >= 0 && left > 0; --g)
      if (rest[g] >= 0) { rest[g] += left; left = 0; }
    if (left > 0) continue;  // no group probed: the pool is empty
    auto slices = l.opening;
    for (const auto& s : step::rest_slices(l, rest)) slices.push_back(s);
    std::vector<int> sample_uses(batch, 0), micro_uses(static_cast<std::size_t>(l.micro_batches), 0);
    for (const auto& s : slices)
      for (int a = s.lo, k = 0; a < s.hi; a += micro, ++k) {
        for (int i = a; i < std::min(s.hi, a + micro); ++i) ++sample_uses[i];
        const auto m = s.first_micro + k;
        REQUIRE(m < l.micro_batches);
        ++micro_uses[m];
        CHECK(m == a / micro);  // the fixed tree's leaf of these samples
      }
    for (int u : sample_uses) CHECK(u == 1);
    for (int u : micro_uses) CHECK(u == 1);
  }
}
