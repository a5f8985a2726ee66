#include <catch2/catch.hpp>

#include <set>

#include "step/evaluation.hpp"

using namespace dynapar;

TEST_CASE("an evaluation's deal: each group a run of chunks by its share, a few chunks a task, every sample once", "[unit][step]") {
  // 1 000 samples in chunks of 64: 16 chunks, the last of 40. Shares 1 : 3 -> chunks [0, 4)
  // and [4, 16) (16 x 1/4 = 4, by hand).
  step::evaluation_deal deal(1000, 64, {1.0, 3.0}, 3);
  CHECK(deal.run(0) == std::pair<int, int>{0, 4});
  CHECK(deal.run(1) == std::pair<int, int>{4, 16});
  auto a = deal.next(0);
  REQUIRE(a.size() == 3);  // chunks 0, 1, 2
  CHECK(a[0].front() == 0);
  CHECK(a[2].back() == 191);
  auto b = deal.next(0);
  REQUIRE(b.size() == 1);  // chunk 3, the rest of its run
  CHECK(b[0].front() == 192);
  CHECK(b[0].size() == 64);
  CHECK(deal.next(0).empty());
  // Brute force: every sample dealt exactly once over both groups, each chunk in order.
  std::multiset<int> seen;
  for (const auto& task : {a, b})
    for (const auto& ids : task) seen.insert(ids.begin(), ids.end());
  std::vector<std::vector<int>> last;
  for (auto t = deal.next(1); !t.empty(); t = deal.next(1)) {
    CHECK(t.size() <= 3);
    for (const auto& ids : t) seen.insert(ids.begin(), ids.end());
    last = t;
  }
  CHECK(last.back().size() == 40);
  CHECK(seen.size() == 1000);
  for (int i = 0; i < 1000; ++i) CHECK(seen.count(i) == 1);
}

TEST_CASE("an evaluation's deal: a group of no share gets no chunk, the last group takes what rounding leaves", "[unit][step]") {
  step::evaluation_deal deal(130, 10, {0.5, 0.0, 0.5});  // 13 chunks: 6.5 rounds to 7 (half away from zero)
  CHECK(deal.run(0) == std::pair<int, int>{0, 7});
  CHECK(deal.run(1) == std::pair<int, int>{7, 7});
  CHECK(deal.run(2) == std::pair<int, int>{7, 13});
  CHECK(deal.next(1).empty());
  CHECK(deal.next(0).size() == 7);  // 32 chunks a task by default: the whole run at once
}
