// One device's side of the holders' sum (model::device_sums) without actors: holders that
// exchange a bucket's chunks in any order, some before their task, each commit the one-place
// tree sum's bits layer by layer (model::tree_sum); refusals, abandoned attempts, a task that
// replaces an older one, and Gloo's wait.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <random>

#include "model/channel.hpp"  // tensor_of, values_of
#include "support/grads.hpp"
#include "model/device_sums.hpp"

using namespace dynapar::model;
using dynapar::test_support::grads_of;
using dynapar::test_support::values;

namespace {

struct wire_msg {
  int to_device;
  std::int64_t step;
  int layer, from_device;
  chunk_msg msg;
};

}  // namespace

TEST_CASE("device_sums: holders exchange a bucket's chunks in any order and each commits the tree sum's bits", "[model][device_sums]") {
  std::mt19937 rng(5);
  const std::int64_t n = 6;
  const std::vector<int> ids{10, 20, 30};
  // leaves[layer][micro-batch]; holder r ran micro-batches 2r and 2r + 1.
  std::vector<std::vector<std::vector<tensor>>> leaves(2);
  for (auto& l : leaves)
    for (int i = 0; i < n; ++i) l.push_back(grads_of(rng));
  std::vector<std::vector<float>> want_norms;
  std::vector<std::vector<std::vector<float>>> want(2);
  for (int l = 0; l < 2; ++l) {
    std::vector<grad_part> all;
    for (int i = 0; i < n; ++i) all.push_back({0, i, leaves[l][i]});
    auto s = tree_sum(all, n);
    REQUIRE(s);
    want[l] = values(*s);
    want_norms.push_back(grad_norms(*s, 64));
  }
  std::vector<device_sums> dev;
  for (int id : ids) dev.emplace_back(id);
  auto mine = [&](int r) {
    return [&, r](int layer) {
      return std::vector<grad_part>{{0, 2 * r, leaves[layer][2 * r]}, {0, 2 * r + 1, leaves[layer][2 * r + 1]}};
    };
  };
  const sum_task task{7, 0, {0, 1}, ids, n, true, 64};
  std::deque<wire_msg> wire;
  std::vector<std::optional<sum_answer>> answers(3);
  auto carry = [&](int r, sum_out out) {
    CHECK(out.refused.empty());
    for (auto& s : out.sends) wire.push_back({ids[s.to], out.step, out.layer, ids[r], std::move(s.msg)});
    if (out.answer) {
      CHECK_FALSE(answers[r].has_value());
      answers[r] = out.answer;
    }
  };
  // Holder 1's task comes last: the others' chunks to it wait for it.
  carry(0, dev[0].start(task, mine(0)));
  carry(2, dev[2].start(task, mine(2)));
  for (auto& m : wire)
    if (m.to_device == 20) carry(1, dev[1].take(m.step, m.layer, m.from_device, std::move(m.msg)));
  wire.erase(std::remove_if(wire.begin(), wire.end(), [](const wire_msg& m) { return m.to_device == 20; }), wire.end());
  CHECK_FALSE(answers[1].has_value());
  carry(1, dev[1].start(task, mine(1)));
  while (!wire.empty()) {
    std::swap(wire.front(), wire[std::uniform_int_distribution<std::size_t>(0, wire.size() - 1)(rng)]);
    auto m = std::move(wire.front());
    wire.pop_front();
    const int r = static_cast<int>(std::find(ids.begin(), ids.end(), m.to_device) - ids.begin());
    carry(r, dev[r].take(m.step, m.layer, m.from_device, std::move(m.msg)));
  }
  for (int r = 0; r < 3; ++r) {
    INFO("holder " << ids[r]);
    REQUIRE(answers[r].has_value());
    CHECK(answers[r]->error.empty());
    CHECK((answers[r]->step == 7 && answers[r]->layer == 0));
    CHECK(answers[r]->bytes_in > 0);
    CHECK(answers[r]->norms == want_norms);
    auto sums = dev[r].commit(7, 0);
    REQUIRE(sums);
    REQUIRE(sums->size() == 2);
    for (int l = 0; l < 2; ++l) {
      CHECK((*sums)[l].first == l);
      CHECK(values((*sums)[l].second) == want[l]);
    }
    auto again = dev[r].commit(7, 0);
    REQUIRE_FALSE(again);
    CHECK(again.err().message.find("holds no sum of layer 0") != std::string::npos);
  }
}

TEST_CASE("device_sums refuses a chunk from a device not at its rank, drops an abandoned attempt's, and waits on Gloo", "[model][device_sums]") {
  std::mt19937 rng(9);
  const auto g0 = grads_of(rng), g1 = grads_of(rng);
  device_sums a(1), b(2);
  auto part = [](const std::vector<tensor>& g, int i) { return [g, i](int) { return std::vector<grad_part>{{0, i, g}}; }; };
  const sum_task t5{5, 3, {}, {1, 2}, 2, true, 0};
  auto from_b = b.start(t5, part(g1, 1));
  REQUIRE(from_b.sends.size() == 1);
  auto out = a.start(t5, part(g0, 0));
  REQUIRE(out.sends.size() == 1);
  // Device 3 claims rank 1 (device 2's): refused, nothing taken.
  auto forged = a.take(5, 3, 3, from_b.sends.front().msg);
  CHECK(forged.refused == std::vector<std::pair<int, int>>{{3, 1}});
  CHECK((forged.sends.empty() && !forged.answer));
  // A new attempt replaces the bucket: the old attempt's chunk is dropped, not refused.
  const sum_task t6{6, 3, {}, {1, 2}, 2, true, 0};
  a.start(t6, part(g0, 0));
  auto stale = a.take(5, 3, 2, from_b.sends.front().msg);
  CHECK((stale.sends.empty() && !stale.answer && stale.refused.empty()));
  CHECK_FALSE(a.commit(5, 3));
  // Not among the holders: the answer says so.
  auto outsider = device_sums(9).start(t6, part(g0, 0));
  REQUIRE(outsider.answer);
  CHECK(outsider.answer->error.find("not among the holders") != std::string::npos);

  // Gloo: the flat buffer to all-reduce; a result of another attempt is not this one's.
  device_sums c(1);
  const sum_task tg{8, 4, {}, {1, 2}, 2, false, 0};
  auto flat = c.gloo_start(tg, part(g0, 0));
  REQUIRE(flat);
  CHECK(values_of(flat->flat).size() == 11);
  CHECK_FALSE(c.gloo_done(7, 4, g1, "").has_value());
  auto held = c.gloo_done(8, 4, g1, "");
  REQUIRE(held);
  CHECK(held->error.empty());
  CHECK(held->bytes_in == 44);  // 2 (P - 1) / P of 11 floats
  auto sums = c.commit(8, 4);
  REQUIRE(sums);
  REQUIRE(sums->size() == 1);
  CHECK(values(sums->front().second) == values(g1));
  c.gloo_start(tg, part(g0, 0));
  auto broken = c.gloo_done(8, 4, {}, "Gloo's all-reduce: peer went away");
  REQUIRE(broken);
  CHECK(broken->error.find("peer went away") != std::string::npos);
  CHECK_FALSE(c.commit(8, 4));
}
