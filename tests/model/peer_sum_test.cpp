// The decentralised sum (model::peer_sum) against the tree evaluated in one place
// (model::tree_sum, itself checked against pairwise summation in schedule_tests): every
// holder ends with the same bits, whatever the split among holders and the order in which
// the messages arrive.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <random>

#include "model/channel.hpp"  // tensor_of, values_of
#include "support/grads.hpp"
#include "model/boxes.hpp"
#include "model/peer_sum.hpp"

using namespace dynapar::model;
using dynapar::test_support::grads_of;
using dynapar::test_support::values;

namespace {

// Runs the holders to the end, delivering messages in a random order; each holder's sum.
std::vector<std::vector<std::vector<float>>> run(const std::vector<std::vector<grad_part>>& mine, std::int64_t n, bool exact,
                                                 std::mt19937& rng) {
  const int P = static_cast<int>(mine.size());
  std::vector<peer_sum> h;
  for (int r = 0; r < P; ++r) h.emplace_back(r, P, n, exact);
  std::deque<chunk_send> wire;
  for (int r = 0; r < P; ++r) {
    auto out = h[r].start(mine[r]);
    REQUIRE(out);
    for (auto& s : *out) wire.push_back(std::move(s));
  }
  while (!wire.empty()) {
    std::swap(wire.front(), wire[std::uniform_int_distribution<std::size_t>(0, wire.size() - 1)(rng)]);
    auto s = std::move(wire.front());
    wire.pop_front();
    auto out = h[s.to].take(std::move(s.msg));
    REQUIRE(out);
    for (auto& x : *out) wire.push_back(std::move(x));
  }
  std::vector<std::vector<std::vector<float>>> sums;
  for (auto& x : h) {
    REQUIRE(x.done());
    auto s = x.sum();
    REQUIRE(s);
    sums.push_back(values(*s));
  }
  return sums;
}

}  // namespace

TEST_CASE("peer_sum: every holder gets tree_sum's bits, for any split and message order", "[model][peer_sum]") {
  std::mt19937 rng(7);
  const std::int64_t n = 11;
  std::vector<std::vector<tensor>> leaves;
  for (int i = 0; i < n; ++i) leaves.push_back(grads_of(rng));
  std::vector<grad_part> all;
  for (int i = 0; i < n; ++i) all.push_back({0, i, leaves[i]});
  auto want = tree_sum(all, n);
  REQUIRE(want);
  const auto expect = values(*want);
  for (int P : {1, 2, 3, 4, 11}) {
    for (int trial = 0; trial < 4; ++trial) {
      // Contiguous ranges of micro-batches, one or more each.
      std::vector<int> cuts{0, static_cast<int>(n)};
      while (static_cast<int>(cuts.size()) < P + 1) {
        const int c = std::uniform_int_distribution<int>(1, static_cast<int>(n) - 1)(rng);
        if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
      }
      std::sort(cuts.begin(), cuts.end());
      std::vector<std::vector<grad_part>> mine(P);
      for (int r = 0; r < P; ++r)
        for (int i = cuts[r]; i < cuts[r + 1]; ++i) mine[r].push_back({0, i, leaves[i]});
      INFO("holders " << P << ", trial " << trial);
      for (const auto& s : run(mine, n, true, rng)) CHECK(s == expect);
    }
  }
}

TEST_CASE("peer_sum with exact: false adds the holders' sums in rank order, as holders_sum", "[model][peer_sum]") {
  std::mt19937 rng(11);
  for (int P : {1, 2, 3, 5}) {
    std::vector<std::vector<grad_part>> mine(P);
    std::vector<grad_part> ordered;
    for (int r = 0; r < P; ++r) {
      mine[r].push_back({0, 0, grads_of(rng)});
      ordered.push_back(mine[r][0]);
    }
    auto want = holders_sum(ordered);
    REQUIRE(want);
    for (const auto& s : run(mine, P, false, rng)) CHECK(s == values(*want));
  }
}

TEST_CASE("peer_sum refuses messages out of turn, twice, or from no holder", "[model][peer_sum]") {
  std::mt19937 rng(3);
  std::vector<grad_part> mine{{0, 0, grads_of(rng)}}, theirs{{0, 1, grads_of(rng)}};
  peer_sum a(0, 2, 2, true), b(1, 2, 2, true);
  CHECK_FALSE(a.take(chunk_msg{false, 1, {}}));  // before start
  auto to_b = a.start(mine);
  REQUIRE(to_b);
  REQUIRE(to_b->size() == 1);
  CHECK_FALSE(a.start(mine));
  auto to_a = b.start(theirs);
  REQUIRE(to_a);
  CHECK_FALSE(a.take(chunk_msg{false, 0, {}}));  // from itself
  CHECK_FALSE(a.take(chunk_msg{false, 5, {}}));  // no such holder
  auto m = to_a->front().msg;
  auto gather = a.take(m);
  REQUIRE(gather);
  CHECK(gather->size() == 1);                    // its summed chunk to b
  auto again = a.take(m);
  REQUIRE_FALSE(again);
  CHECK(again.err().message.find("twice") != std::string::npos);
  CHECK_FALSE(a.sum());                          // b's chunk is not in yet
  peer_sum empty(0, 2, 2, true);
  auto none = empty.start({});
  REQUIRE_FALSE(none);
  CHECK(none.err().message.find("no partial sums") != std::string::npos);
}

TEST_CASE("a layer without parameters is summed by every holder at once, with no message", "[model][peer_sum]") {
  // A stage of Flatten or ReLU alone over node processes: each holder's parts have no tensors.
  std::vector<grad_part> none{{0, 0, {}}, {0, 1, {}}};
  peer_sum a(0, 3, 2, true), c(2, 3, 2, true);
  for (auto* h : {&a, &c}) {
    auto out = h->start(none);
    REQUIRE(out);
    CHECK(out->empty());
    REQUIRE(h->done());
    auto s = h->sum();
    REQUIRE(s);
    CHECK(s->empty());
  }
  std::mt19937 rng(4);
  auto stray = a.take(chunk_msg{false, 1, {grad_part{0, 0, {grads_of(rng).front()}}}});
  REQUIRE_FALSE(stray);
  CHECK(stray.err().message.find("without gradients") != std::string::npos);
}

TEST_CASE("a bucket of layers summed as one gives each layer its own tree_sum's bits", "[model][peer_sum]") {
  std::mt19937 rng(19);
  const std::int64_t n = 6;
  const int layers = 3, P = 3;
  // leaves[l][i]: layer l's gradients of micro-batch i (layer 1 has a single parameter).
  std::vector<std::vector<std::vector<tensor>>> leaves(layers);
  for (int l = 0; l < layers; ++l)
    for (int i = 0; i < n; ++i) {
      auto g = grads_of(rng);
      if (l == 1) g.resize(1);
      leaves[l].push_back(g);
    }
  // Holder r has micro-batches [2r, 2r + 2) of every layer: one aligned node each.
  std::vector<std::vector<grad_part>> mine(P);
  for (int r = 0; r < P; ++r) {
    std::vector<std::vector<grad_part>> per_layer(layers);
    for (int l = 0; l < layers; ++l) {
      auto node = tree_sum({{0, 0, leaves[l][2 * r]}, {0, 1, leaves[l][2 * r + 1]}}, 2);
      REQUIRE(node);
      per_layer[l].push_back({1, r, *node});
    }
    auto joined = join_layers(std::move(per_layer));
    REQUIRE(joined);
    mine[r] = std::move(*joined);
  }
  for (const auto& s : run(mine, n, true, rng)) {
    std::vector<tensor> flat_sum;
    for (const auto& v : s) flat_sum.push_back(tensor_of(v, "cpu"));
    auto per_layer = split_layers(flat_sum, {2, 1, 2});
    REQUIRE(per_layer);
    for (int l = 0; l < layers; ++l) {
      std::vector<grad_part> all;
      for (int i = 0; i < n; ++i) all.push_back({0, i, leaves[l][i]});
      auto want = tree_sum(all, n);
      REQUIRE(want);
      INFO("layer " << l);
      CHECK(values((*per_layer)[l]) == values(*want));
    }
  }
}

TEST_CASE("a bucket refuses layers with other partial sums, and a sum of the wrong size", "[model][peer_sum]") {
  std::mt19937 rng(23);
  auto other = join_layers({{{0, 0, grads_of(rng)}}, {{0, 1, grads_of(rng)}}});
  REQUIRE_FALSE(other);
  CHECK(other.err().message.find("layer 1") != std::string::npos);
  CHECK_FALSE(join_layers({{{0, 0, grads_of(rng)}}, {}}));
  CHECK_FALSE(join_layers({}));
  auto wrong = split_layers(grads_of(rng), {1, 2});
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().message.find("layers of 3") != std::string::npos);
}

TEST_CASE("peer_sum with one holder sends nothing and copies no gradient", "[model][peer_sum]") {
  // A layer held by one device (a pipeline's stage): its sum is the tree over its own parts,
  // with no flat copy of the layer on the way in or out (node memory: docs/BENCHMARKS.md).
  std::mt19937 rng(5);
  const auto leaf = grads_of(rng);
  peer_sum one(0, 1, 1, true);
  auto out = one.start({{0, 0, leaf}});
  REQUIRE(out);
  CHECK(out->empty());
  REQUIRE(one.done());
  auto s = one.sum();
  REQUIRE(s);
  REQUIRE(s->size() == leaf.size());
  for (std::size_t i = 0; i < leaf.size(); ++i) CHECK((*s)[i]->t.data_ptr() == leaf[i]->t.data_ptr());
  CHECK_FALSE(one.take({false, 0, {}}));  // nobody else to hear from
}
