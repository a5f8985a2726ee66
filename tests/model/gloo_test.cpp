// The Gloo groups that add exact: false sums among a layer's holders (model/collective.hpp):
// ranks in threads of this process meet at a TCPStore and all-reduce over loopback.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "model/channel.hpp"
#include "model/collective.hpp"

using namespace dynapar;

TEST_CASE("a holder's partial sums flatten into one buffer of their sum, cut back by the gradients' shapes", "[unit][gloo]") {
  const model::grad_part a{0, 0, {model::tensor_of({1, 2, 3}, "cpu"), model::tensor_of({4, 5}, "cpu")}};
  const model::grad_part b{0, 1, {model::tensor_of({10, 20, 30}, "cpu"), model::tensor_of({40, 50}, "cpu")}};
  auto f = model::flatten({a, b});
  REQUIRE(f);
  CHECK(model::values_of(f->flat) == std::vector<float>{11, 22, 33, 44, 55});
  CHECK(model::values_of(a.grads[0]) == std::vector<float>{1, 2, 3});  // a copy: the gradients stay
  const model::grad_part other_layer{0, 2, {model::tensor_of({1}, "cpu")}};
  CHECK_FALSE(model::flatten({a, other_layer}));
  CHECK_FALSE(model::flatten({}));
}

TEST_CASE("Gloo groups of 1 to 4 ranks sum every rank's gradients, each rank the same values", "[gloo]") {
  if (!model::have_gloo()) {
    WARN("built without Gloo: skipped");
    return;
  }
  auto store = model::start_gloo_store("127.0.0.1");
  REQUIRE(store);
  for (int size = 1; size <= 4; ++size) {
    // Rank r holds (r + 1) x [1, 2, 3] and (r + 1) x [4, 5]: whole numbers, so any order of
    // adding gives the same floats.
    std::vector<result<std::vector<model::tensor>>> got(static_cast<std::size_t>(size), make_error("x", "not run"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r)
      ranks.emplace_back([&, r] {
        const float k = static_cast<float>(r + 1);
        auto g = model::join_gloo_group((*store)->endpoint(), "test" + std::to_string(size), "127.0.0.1", r, size, 20);
        if (!g) return void(got[static_cast<std::size_t>(r)] = g.err());
        auto f = model::flatten({{0, 0, {model::tensor_of({k, 2 * k, 3 * k}, "cpu"), model::tensor_of({4 * k, 5 * k}, "cpu")}}});
        if (!f) return void(got[static_cast<std::size_t>(r)] = f.err());
        got[static_cast<std::size_t>(r)] = (*g)->all_reduce(*f);
      });
    for (auto& t : ranks) t.join();
    const float n = static_cast<float>(size * (size + 1) / 2);
    for (const auto& sum : got) {
      REQUIRE(sum);
      REQUIRE(sum->size() == 2);
      CHECK(model::values_of((*sum)[0]) == std::vector<float>{n, 2 * n, 3 * n});
      CHECK(model::values_of((*sum)[1]) == std::vector<float>{4 * n, 5 * n});
    }
  }
}

TEST_CASE("a Gloo group whose peer never comes, or a rendezvous that is not HOST:PORT, is an error", "[gloo]") {
  if (!model::have_gloo()) {
    WARN("built without Gloo: skipped");
    return;
  }
  CHECK(model::join_gloo_group("localhost", "x", "127.0.0.1", 0, 2, 1).err().message.find("not HOST:PORT") != std::string::npos);
  auto store = model::start_gloo_store("127.0.0.1");
  REQUIRE(store);
  auto alone = model::join_gloo_group((*store)->endpoint(), "alone", "127.0.0.1", 0, 2, 1);  // rank 1 never joins
  REQUIRE_FALSE(alone);
  CHECK(alone.err().message.find("joining Gloo group alone as rank 0 of 2") != std::string::npos);
}

TEST_CASE("a Gloo all-reduce whose peer went away is an error the driver retries on new communicators", "[gloo]") {
  if (!model::have_gloo()) {
    WARN("built without Gloo: skipped");
    return;
  }
  auto store = model::start_gloo_store("127.0.0.1");
  REQUIRE(store);
  // Both ranks join; rank 1's process then goes away (its group is destroyed) while rank 0
  // waits in the all-reduce.
  result<std::unique_ptr<model::gloo_group>> peer = make_error("x", "not run");
  std::thread joiner([&] { peer = model::join_gloo_group((*store)->endpoint(), "gone", "127.0.0.1", 1, 2, 5); });
  auto me = model::join_gloo_group((*store)->endpoint(), "gone", "127.0.0.1", 0, 2, 5);
  joiner.join();
  REQUIRE(me);
  REQUIRE(peer);
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    peer->reset();
  });
  auto f = model::flatten({{0, 0, {model::tensor_of({1, 2, 3}, "cpu")}}});
  REQUIRE(f);
  auto sum = (*me)->all_reduce(*f);
  leaver.join();
  REQUIRE_FALSE(sum);
  INFO(sum.err().message);
  // The marker survives a prefix on the way to the driver, which takes it for a transient
  // failure (actors/driver_faults.cpp); errors without it are not.
  CHECK(model::is_gloo_failure(sum.err()));
  CHECK(model::is_gloo_failure(make_error("remote", "device 3: " + sum.err().message)));
  CHECK_FALSE(model::is_gloo_failure(make_error("bad_call", "device 3: call.reduce.holders must be distinct")));
  CHECK_FALSE(model::is_gloo_failure(make_error("gloo", "the Gloo rendezvous on 127.0.0.1: refused")));
}
