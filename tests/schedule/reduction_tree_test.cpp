// The exact sum's fixed tree: any split of a step's micro-batches among holders, in any
// arrival order, adds the same numbers in the same grouping as one holder of them all; checked
// against pairwise summation written from its textbook definition, symbolically and in floats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "schedule/reduction_tree.hpp"

using namespace dynapar;
using namespace dynapar::schedule;

namespace {

std::string plus(std::string a, std::string b) { return "(" + a + "+" + b + ")"; }

// Pairwise summation: split a range at the largest power of two below its length.
std::string pairwise(std::int64_t lo, std::int64_t hi) {
  if (hi - lo == 1) return "m" + std::to_string(lo);
  std::int64_t p = 1;
  while (p * 2 < hi - lo) p *= 2;
  return plus(pairwise(lo, lo + p), pairwise(lo + p, hi));
}

// Micro-batches [0, n) cut into `holders` contiguous ranges at random points, each holder
// receiving its leaves in order or shuffled; all their nodes together.
template <class T, class Leaf, class Add>
std::vector<std::pair<tree_node, T>> split_sums(std::int64_t n, int holders, bool shuffle, std::mt19937& rng, Leaf&& leaf, Add&& add,
                                                std::size_t* most_nodes = nullptr) {
  std::vector<std::int64_t> cuts{0, n};
  for (int h = 1; h < holders; ++h) cuts.push_back(std::uniform_int_distribution<std::int64_t>(0, n)(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::pair<tree_node, T>> all;
  for (std::size_t h = 0; h + 1 < cuts.size(); ++h) {
    std::vector<std::int64_t> order;
    for (auto m = cuts[h]; m < cuts[h + 1]; ++m) order.push_back(m);
    if (shuffle) std::shuffle(order.begin(), order.end(), rng);
    partial_sums<T> p;
    for (auto m : order) {
      p.add_leaf(m, leaf(m), add);
      if (most_nodes) *most_nodes = std::max(*most_nodes, p.size());
    }
    for (auto& x : p.take()) all.push_back(std::move(x));
  }
  return all;
}

}  // namespace

TEST_CASE("reduction tree: every split and arrival order adds in pairwise summation's grouping", "[unit][schedule]") {
  std::mt19937 rng(7);
  auto leaf = [](std::int64_t m) { return "m" + std::to_string(m); };
  for (std::int64_t n = 1; n <= 70; ++n)
    for (int holders : {1, 2, 3, 5, 9})
      for (bool shuffle : {false, true}) {
        INFO("n=" << n << " holders=" << holders << " shuffled=" << shuffle);
        auto sum = evaluate_tree(split_sums<std::string>(n, holders, shuffle, rng, leaf, plus), n, plus);
        REQUIRE(sum);
        CHECK(*sum == pairwise(0, n));
      }
}

TEST_CASE("reduction tree: a holder of a contiguous range keeps O(log n) buffers", "[unit][schedule]") {
  std::mt19937 rng(3);
  auto leaf = [](std::int64_t) { return 1; };
  auto add = [](int a, int b) { return a + b; };
  for (std::int64_t n : {16, 100, 1000, 4096}) {
    std::size_t most = 0;
    auto parts = split_sums<int>(n, 4, /*shuffle=*/false, rng, leaf, add, &most);
    INFO("n=" << n);
    CHECK(most <= 2 * static_cast<std::size_t>(tree_top(n)) + 1);
    CHECK(parts.size() <= 4 * (2 * static_cast<std::size_t>(tree_top(n)) + 1));
    auto sum = evaluate_tree(std::move(parts), n, add);
    REQUIRE(sum);
    CHECK(*sum == n);
  }
}

TEST_CASE("reduction tree: float sums are bit-identical across splits and closer than a sequential fold", "[unit][schedule]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> values(3001);
  for (auto& v : values) v = u(rng) * 1000.f + 0.1f;
  auto leaf = [&](std::int64_t m) { return values[static_cast<std::size_t>(m)]; };
  auto add = [](float a, float b) { return a + b; };
  const auto n = static_cast<std::int64_t>(values.size());
  auto one = evaluate_tree(split_sums<float>(n, 1, false, rng, leaf, add), n, add);
  REQUIRE(one);
  for (int holders : {2, 4, 7, 16}) {
    auto many = evaluate_tree(split_sums<float>(n, holders, true, rng, leaf, add), n, add);
    REQUIRE(many);
    CHECK(std::memcmp(&*many, &*one, sizeof(float)) == 0);
  }
  double exact = 0;
  float fold = 0;
  for (float v : values) {
    exact += v;
    fold += v;
  }
  CHECK(std::abs(*one - exact) < std::abs(fold - exact));
}

TEST_CASE("reduction tree: missing, repeated, overlapping and out-of-range parts are errors", "[unit][schedule]") {
  auto add = [](int a, int b) { return a + b; };
  using parts = std::vector<std::pair<tree_node, int>>;
  auto missing = evaluate_tree(parts{{{1, 0}, 2}, {{0, 3}, 1}}, 4, add);  // micro-batch 2 absent
  REQUIRE_FALSE(missing);
  CHECK(missing.err().message.find("micro-batch 2") != std::string::npos);
  CHECK_FALSE(evaluate_tree(parts{{{0, 0}, 1}, {{0, 0}, 1}}, 1, add));              // twice
  CHECK_FALSE(evaluate_tree(parts{{{1, 0}, 2}, {{0, 1}, 1}}, 2, add));              // inside another
  CHECK_FALSE(evaluate_tree(parts{{{0, 0}, 1}, {{0, 1}, 1}, {{0, 2}, 1}}, 2, add));  // beyond n
  CHECK_FALSE(evaluate_tree(parts{{{-1, 0}, 1}}, 1, add));
  CHECK_FALSE(evaluate_tree(parts{}, 0, add));
  auto ok = evaluate_tree(parts{{{1, 0}, 2}, {{0, 2}, 1}}, 3, add);
  REQUIRE(ok);
  CHECK(*ok == 3);
}
