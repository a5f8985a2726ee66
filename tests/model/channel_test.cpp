// The channel's multi-rank logic on CPUs (the in-process and ZeroMQ backends), the
// decentralised exact sum against the tree evaluated in one place, and places checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "model/channel.hpp"
#include "schedule/reduction_tree.hpp"

using namespace dynapar::model;

namespace {
// Runs fn(rank) on every rank at once; returns each rank's status.
template <class F>
std::vector<dynapar::status> on_all(std::vector<std::unique_ptr<channel>>& ranks, F fn) {
  std::vector<dynapar::status> out(ranks.size(), dynapar::ok_status());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks.size(); ++r) threads.emplace_back([&, r] { out[r] = fn(*ranks[r], static_cast<int>(r)); });
  for (auto& t : threads) t.join();
  return out;
}
}  // namespace

TEST_CASE("ordered_sum adds in rank order, bit for bit, and every rank gets it", "[channel]") {
  for (int n : {1, 2, 3, 5}) {
    auto ranks = make_local_channels(n);
    // Values whose float sum depends on the order of addition.
    std::vector<std::vector<float>> parts;
    for (int r = 0; r < n; ++r) parts.push_back({1e8f * (r % 2 ? -1.f : 1.f), 1.f + 1e-7f * r, 3.3f * r, -0.1f});
    std::vector<tensor> ts;
    for (int r = 0; r < n; ++r) ts.push_back(tensor_of(parts[r], "cpu"));
    auto st = on_all(ranks, [&](channel& c, int r) { return ordered_sum(c, ts[r]); });
    for (const auto& s : st) REQUIRE(s);
    // The reference: a plain left fold in float, rank 0 first.
    std::vector<float> want = parts[0];
    for (int r = 1; r < n; ++r)
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = want[i] + parts[r][i];
    for (int r = 0; r < n; ++r) CHECK(values_of(ts[r]) == want);
  }
}

TEST_CASE("all_reduce_sum and send_recv over in-process ranks", "[channel]") {
  auto ranks = make_local_channels(4);
  std::vector<tensor> ts, got;
  for (int r = 0; r < 4; ++r) ts.push_back(tensor_of({float(r), 2.f * r}, "cpu"));
  for (int r = 0; r < 4; ++r) got.push_back(tensor_of({0.f, 0.f}, "cpu"));
  // A ring: each rank sends its tensor to the next and receives the previous one's.
  auto st = on_all(ranks, [&](channel& c, int r) { return c.send_recv(ts[r], (r + 1) % 4, got[r], (r + 3) % 4); });
  for (const auto& s : st) REQUIRE(s);
  for (int r = 0; r < 4; ++r) CHECK(values_of(got[r]) == std::vector<float>{float((r + 3) % 4), 2.f * ((r + 3) % 4)});
  st = on_all(ranks, [&](channel& c, int r) { return c.all_reduce_sum(ts[r]); });
  for (const auto& s : st) REQUIRE(s);
  for (int r = 0; r < 4; ++r) CHECK(values_of(ts[r]) == std::vector<float>{6.f, 12.f});
}

TEST_CASE("a channel refuses a wrong peer and a tensor of another shape", "[channel]") {
  auto ranks = make_local_channels(2);
  auto t = tensor_of({1.f}, "cpu");
  CHECK(ranks[0]->send(t, 2).err().code == "bad_rank");
  CHECK(ranks[0]->recv(t, -1).err().code == "bad_rank");
  REQUIRE(ranks[0]->send(tensor_of({1.f, 2.f}, "cpu"), 1));
  const auto st = ranks[1]->recv(t, 0);
  REQUIRE_FALSE(st);
  CHECK(st.err().code == "bad_tensor");
}

TEST_CASE("places: a malformed one or a GPU this process cannot see is an error naming it", "[place]") {
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:0 "}) {
    const auto st = check_place(bad);
    REQUIRE_FALSE(st);
    CHECK(st.err().code == "bad_place");
    CHECK(st.err().message.find(bad) != std::string::npos);
  }
  CHECK(check_place("cpu"));
  const auto beyond = check_place("cuda:" + std::to_string(cuda_device_count()));
  REQUIRE_FALSE(beyond);
  CHECK(beyond.err().code == "no_gpu");
  CHECK(beyond.err().message.find("cuda:") != std::string::npos);
}

namespace {

// Leaves 0..n-1 of float vectors; `holders` contiguous ranges cut at `cuts`; each holder's
// partial sums (the binary counter in plain floats, independent of LibTorch) as flat tensors.
std::vector<std::vector<grad_part>> split_parts(const std::vector<std::vector<float>>& leaves, const std::vector<std::int64_t>& cuts) {
  auto add = [](std::vector<float> a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = a[i] + b[i];
    return a;
  };
  std::vector<std::vector<grad_part>> out;
  for (std::size_t h = 0; h + 1 < cuts.size(); ++h) {
    dynapar::schedule::partial_sums<std::vector<float>> p;
    for (auto m = cuts[h]; m < cuts[h + 1]; ++m) p.add_leaf(m, leaves[static_cast<std::size_t>(m)], add);
    out.emplace_back();
    for (auto& [node, values] : p.take()) out.back().push_back({node.level, node.index, {tensor_of(values, "cpu")}});
  }
  return out;
}

std::vector<float> one_place_sum(const std::vector<std::vector<float>>& leaves) {
  auto add = [](std::vector<float> a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = a[i] + b[i];
    return a;
  };
  dynapar::schedule::partial_sums<std::vector<float>> p;
  for (std::size_t m = 0; m < leaves.size(); ++m) p.add_leaf(static_cast<std::int64_t>(m), leaves[m], add);
  return *dynapar::schedule::evaluate_tree(p.take(), static_cast<std::int64_t>(leaves.size()), add);
}

std::vector<std::vector<float>> random_leaves(int n, int width, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> leaves(static_cast<std::size_t>(n), std::vector<float>(static_cast<std::size_t>(width)));
  for (auto& l : leaves)
    for (auto& v : l) v = u(rng) * std::pow(10.f, 4.f * u(rng));  // magnitudes 1e-4..1e4: order matters
  return leaves;
}

// Every rank runs tree_all_reduce on its parts; each must end with the one-place sum's bits.
void check_tree_all_reduce(std::vector<std::unique_ptr<channel>>& ranks, const std::vector<std::vector<float>>& leaves,
                           const std::vector<std::int64_t>& cuts) {
  const auto parts = split_parts(leaves, cuts);
  const auto want = one_place_sum(leaves);
  std::vector<tensor> outs;
  for (std::size_t r = 0; r < ranks.size(); ++r) outs.push_back(tensor_of(std::vector<float>(want.size(), 0.f), "cpu"));
  auto st = on_all(ranks, [&](channel& c, int r) {
    return tree_all_reduce(c, parts[static_cast<std::size_t>(r)], static_cast<std::int64_t>(leaves.size()), outs[static_cast<std::size_t>(r)]);
  });
  for (const auto& s : st) REQUIRE(s);
  for (const auto& o : outs) CHECK(values_of(o) == want);
}

}  // namespace

TEST_CASE("tree_all_reduce: each rank ends with the one-place tree sum's bits, whatever the split", "[channel]") {
  const auto leaves = random_leaves(13, 1001, 5);
  for (const auto& cuts : std::vector<std::vector<std::int64_t>>{{0, 13}, {0, 6, 13}, {0, 0, 13}, {0, 3, 4, 11, 13}, {0, 1, 2, 3, 13}}) {
    INFO("holders " << cuts.size() - 1);
    auto ranks = make_local_channels(static_cast<int>(cuts.size()) - 1);
    check_tree_all_reduce(ranks, leaves, cuts);
  }
}

TEST_CASE("tree_all_reduce between ZeroMQ ranks over loopback TCP", "[channel][zmq]") {
  const int P = 3;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> endpoints(P);
  int published = 0;
  std::vector<std::unique_ptr<channel>> ranks(P);
  std::vector<std::thread> threads;
  std::vector<dynapar::status> made(P, dynapar::ok_status());
  for (int r = 0; r < P; ++r)
    threads.emplace_back([&, r] {
      auto exchange = [&](const std::string& mine) -> dynapar::result<std::vector<std::string>> {
        std::unique_lock<std::mutex> lock(mu);
        endpoints[static_cast<std::size_t>(r)] = mine;
        ++published;
        cv.notify_all();
        cv.wait(lock, [&] { return published == P; });
        return endpoints;
      };
      auto c = make_zmq_channel(r, P, "tcp://127.0.0.1:0", exchange, 3000);
      if (!c) made[static_cast<std::size_t>(r)] = c.err();
      else ranks[static_cast<std::size_t>(r)] = std::move(*c);
    });
  for (auto& t : threads) t.join();
  for (const auto& s : made) REQUIRE(s);
  check_tree_all_reduce(ranks, random_leaves(16, 70001, 9), {0, 5, 9, 16});
  // all_reduce_sum: ranks as leaves, the same on every rank.
  std::vector<tensor> ts;
  for (int r = 0; r < P; ++r) ts.push_back(tensor_of({1e8f, 1.f + r, -1e8f}, "cpu"));
  auto st = on_all(ranks, [&](channel& c, int r) { return c.all_reduce_sum(ts[static_cast<std::size_t>(r)]); });
  for (const auto& s : st) REQUIRE(s);
  const std::vector<float> want{(1e8f + 1e8f) + 1e8f, (1.f + 2.f) + 3.f, (-1e8f + -1e8f) + -1e8f};
  for (const auto& t : ts) CHECK(values_of(t) == want);
  // A peer that never sends: the wait ends with an error naming it.
  const auto waited = ranks[0]->recv(tensor_of({0.f}, "cpu"), 2);
  REQUIRE_FALSE(waited);
  CHECK(waited.err().code == "timeout");
  CHECK(waited.err().message.find("rank 2") != std::string::npos);
}
