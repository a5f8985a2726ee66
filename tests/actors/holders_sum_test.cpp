// The holders adding a step's gradients among themselves (peer_sum) train one device's bits,
// and each holder receives exactly the chunks it should: by layer, and by bucket.
#include <catch2/catch.hpp>

#include <map>

#include "actors/trainer.hpp"
#include "model/api.hpp"
#include "model/collective.hpp"
#include "train_helpers.hpp"

using namespace dynapar;
using test::diff_from_one_device;
using test::short_adam_run;
using test::two_groups;

TEST_CASE("the holders adding among themselves (peer_sum) train the same bits as the driver's sum", "[actor][train]") {
  model::set_threads(1);
  const auto d = data::synthetic(640, 3);
  auto m = model::make_model("cnn", 42);
  REQUIRE(m);
  auto s = short_adam_run(model::num_layers(**m), 4);
  s.peer_sum = true;
  auto peer = actors::train(**m, d, s);
  REQUIRE(peer);
  CHECK(diff_from_one_device(**m, d, s, peer->final_layers) == 0);
  // exact: false: the holders' sums in holder order, wherever they are added.
  s.exact = false;
  auto inexact_peer = actors::train(**m, d, s);
  s.peer_sum = false;
  auto inexact_central = actors::train(**m, d, s);
  REQUIRE(inexact_peer);
  REQUIRE(inexact_central);
  CHECK(model::max_rel_diff(inexact_peer->final_layers, inexact_central->final_layers) == 0);
  CHECK(diff_from_one_device(**m, d, s, inexact_peer->final_layers) < 1e-3);
  if (!model::have_gloo()) {
    WARN("built without Gloo: its sum is not tested");
    return;
  }
  // Through Gloo's ring: every layer here has two holders, and with two ranks the ring adds
  // a + b, which is b + a: the same bits as the holders' own sum.
  auto store = model::start_gloo_store("127.0.0.1");
  REQUIRE(store);
  s.peer_sum = true;
  s.gloo_store = (*store)->endpoint();
  auto gloo = actors::train(**m, d, s);
  REQUIRE(gloo);
  CHECK(model::max_rel_diff(gloo->final_layers, inexact_central->final_layers) == 0);
  // What each holder received for the sums: the ring's 2 (P - 1) / P of every layer it holds
  // (here P = 2: the whole layer, float32), each step. The CNN's parameters by layer:
  const std::vector<double> numel = {32 * 9 + 32, 64 * 32 * 9 + 64, 3136 * 128 + 128, 128 * 10 + 10};
  const std::map<int, std::vector<int>> held = {{0, {0, 1}}, {1, {2, 3}}, {2, {0}}, {3, {1, 2}}, {4, {3}}};  // two_groups' splits
  for (const auto& [id, layers] : held) {
    double want = 0;
    for (int l : layers) want += 4 * numel[static_cast<std::size_t>(l)] * s.steps;
    CHECK(gloo->sum_received_bytes.at(id) == want);
  }
}

TEST_CASE("each holder receives the others' slices of its chunk, one per partial sum, and the summed chunks",
          "[actor][train]") {
  model::set_threads(1);
  const auto d = data::synthetic(640, 3);
  auto m = model::make_model("cnn", 42);
  REQUIRE(m);
  // The CNN's parameters by layer (conv 1x32x3x3, conv 32x64x3x3, fc 3136x128, fc 128x10,
  // each with its bias), float32.
  const std::vector<std::int64_t> numel = {32 * 9 + 32, 64 * 32 * 9 + 64, 3136 * 128 + 128, 128 * 10 + 10};
  training::train_settings s;
  s.steps = 3;
  s.batch = 64;
  s.optimizer = {"sgd", 0.05, 0.9, 0};
  s.peer_sum = true;
  s.bucket_bytes = 1;  // every layer a bucket of its own, as `received` counts (the last section: one bucket)
  // Chunk k of a bucket of n parameters among P holders: [n k / P, n (k + 1) / P).
  const auto chunk = [](std::int64_t n, int k, int P) { return n * (k + 1) / P - n * k / P; };
  auto buckets = numel;
  const auto received = [&](const std::vector<int>& parts) {  // by rank: the bytes a step
    const int P = static_cast<int>(parts.size());
    std::vector<double> out(parts.size(), 0);
    for (int k = 0; k < P; ++k)
      for (auto n : buckets)
        for (int h = 0; h < P; ++h)
          if (h != k) out[k] += 4.0 * static_cast<double>(parts[h] * chunk(n, k, P) + chunk(n, h, P));
    return out;
  };
  SECTION("two groups of 4 aligned micro-batches: one partial sum each, the layer once") {
    s.plan.groups = {{{0}, {0, 4}, 32, 8}, {{1}, {0, 4}, 32, 8}};
    auto r = actors::train(**m, d, s);
    REQUIRE(r);
    const auto want = received({1, 1});
    CHECK(want[0] == 4.0 * (numel[0] + numel[1] + numel[2] + numel[3]));
    for (int id : {0, 1}) CHECK(r->sum_received_bytes.at(id) == s.steps * want[static_cast<std::size_t>(id)]);
  }
  // Three groups of 3, 3 and 2 micro-batches: 2, 2 and 1 partial sums (the tree's aligned
  // blocks).
  const auto three_groups = [&] {
    s.plan.groups = {{{0}, {0, 4}, 24, 8}, {{1}, {0, 4}, 24, 8}, {{2}, {0, 4}, 16, 8}};
    auto r = actors::train(**m, d, s);
    REQUIRE(r);
    CHECK(diff_from_one_device(**m, d, s, r->final_layers) == 0);
    const auto want = received({2, 2, 1});
    for (int id : {0, 1, 2}) CHECK(r->sum_received_bytes.at(id) == s.steps * want[static_cast<std::size_t>(id)]);
  };
  SECTION("three groups, a bucket per layer") { three_groups(); }
  SECTION("three groups with the default buckets: the 4 layers (1.7 MB) are one, cut into chunks as a whole") {
    s.bucket_bytes = training::train_settings{}.bucket_bytes;
    buckets = {numel[0] + numel[1] + numel[2] + numel[3]};
    three_groups();
  }
}
