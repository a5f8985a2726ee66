// The channel's multi-rank logic on CPUs (the in-process backend), and places checked.
#include <catch2/catch.hpp>

#include <thread>

#include "model/channel.hpp"

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
