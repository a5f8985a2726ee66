// The driver's two gradient reductions (actors/reduction.hpp) against holders faked by hand:
// the central one adds the holders' parts into the sums worked out below and sends each
// holder its layer's; the peer one hands every holder its layer's task and commits. Stale
// replies are ignored; a missing micro-batch is an error naming the layer. Neither asks a
// holder anything before it is ready.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>

#include "actors/reduction.hpp"
#include "model/api.hpp"
#include "planner/time_model.hpp"

using namespace dynapar;
using namespace dynapar::actors;

namespace {

float first_value(const model::tensor& t) {
  model::tensor_meta meta;
  const auto b = model::to_blob(t, meta);
  float v = 0;
  std::memcpy(&v, b.data, sizeof v);
  return v;
}

// What the fake holders were told, in arrival order.
struct told {
  std::mutex m;
  std::vector<std::tuple<int, int, float, double>> applied;      // device, layer, the sum's value, batch
  std::vector<reduce_task> tasks;                                 // (peer) the tasks received
  std::vector<std::tuple<int, std::int64_t, int, double>> commits;  // device, tag, layer, batch
  std::vector<double> scales;                                       // clipping's, of every apply and commit
};

// A holder whose layers' partial sums are given as (layer, [(micro-batch, value)]): one
// float each. Before each answer it sends one of an older attempt (a stale reply).
caf::behavior fake_holder(caf::event_based_actor* self, int id, std::map<int, std::vector<std::pair<int, float>>> parts,
                          std::shared_ptr<told> log) {
  return {
      [=](grads_atom, std::int64_t tag, const std::vector<int>& layers) {
        device_gradients g{id, tag, {}};
        for (int l : layers) {
          std::vector<model::grad_part> mine;
          for (auto [index, value] : parts.at(l)) mine.push_back({0, index, {model::filled_tensor(3, value)}});
          g.layers.emplace_back(l, std::move(mine));
        }
        device_gradients stale{id, tag - 1, {}};
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), std::move(stale));
        return g;
      },
      [=](apply_atom, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, double batch, double scale) {
        std::lock_guard<std::mutex> lock(log->m);
        log->scales.push_back(scale);
        log->applied.emplace_back(id, layer, first_value(sum.at(0)), batch);
        return applied{id, tag, layer};
      },
      [=](reduce_atom, const reduce_task& t) {
        std::lock_guard<std::mutex> lock(log->m);
        log->tasks.push_back(t);
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), sum_held{id, t.tag - 1, t.layer, 0, {{-1.0f}}});
        // Asked for norms (clipping): one a bucket layer, the layer's number and the holder's id.
        std::vector<std::vector<float>> norms;
        if (t.norms_divisor > 0)
          for (int l : t.layers.empty() ? std::vector<int>{t.layer} : t.layers) norms.push_back({static_cast<float>(l), static_cast<float>(id)});
        return sum_held{id, t.tag, t.layer, 0, norms};
      },
      [=](commit_atom, std::int64_t tag, int layer, double batch, double scale) {
        std::lock_guard<std::mutex> lock(log->m);
        log->scales.push_back(scale);
        log->commits.emplace_back(id, tag, layer, batch);
        return applied{id, tag, layer};
      },
  };
}

// The fake as a device handle: it takes only the four messages a reduction sends (an
// unchecked cast; a message the reduction should not send would go unanswered and time out).
template <class... Ts>
device_handle holder(caf::actor_system& sys, Ts&&... xs) {
  return caf::actor_cast<device_handle>(sys.spawn(fake_holder, std::forward<Ts>(xs)...));
}

// Runs one reduction to its end as the driver does, every holder ready at once; returns
// finish()'s status.
status run(gradient_reduction& r, caf::scoped_actor& self, const reduction_step& s, int& acks) {
  auto work = r.start(s);
  for (const auto& [l, ids] : *s.holders)
    for (int id : ids) work->ready(id);  // a second time is ignored
  while (!work->done())
    self->receive([&](device_gradients& g) { work->on(g); }, [&](const sum_held& h) { work->on(h); },
                  caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no reply"); });
  if (auto st = work->finish(); !st) return st;
  acks = work->apply(64, 1.0);
  for (int k = 0; k < acks; ++k)
    self->receive([&](const applied& a) { CHECK(a.tag == s.tag); }, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no ack"); });
  return ok_status();
}

// An actor system with holders faked by hand (`with`), stopped at the end.
struct fakes {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<told> log = std::make_shared<told>();
  std::map<int, device_handle> devices;
  explicit fakes(std::initializer_list<int> with) {
    for (int id : with) devices[id] = holder(sys, id, std::map<int, std::vector<std::pair<int, float>>>{}, log);
  }
  ~fakes() {
    for (auto& [id, a] : devices) self->send_exit(a, caf::exit_reason::user_shutdown);
  }
};

}  // namespace

TEST_CASE("the central reduction adds every holder's parts in the tree and sends each holder its sum", "[actor][reduction]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto log = std::make_shared<told>();
  // Layer 0 on devices 1 and 2 (two groups: micro-batches 0-1 and 2); layer 1 on device 2 only
  // here, but holding all three micro-batches.
  std::map<int, device_handle> devices;
  devices[1] = holder(sys, 1, std::map<int, std::vector<std::pair<int, float>>>{{0, {{0, 1.f}, {1, 2.f}}}}, log);
  devices[2] = holder(sys, 2, std::map<int, std::vector<std::pair<int, float>>>{{0, {{2, 4.f}}}, {1, {{0, 8.f}, {1, 16.f}, {2, 32.f}}}}, log);
  const std::map<int, std::vector<int>> holders = {{0, {1, 2}}, {1, {2}}};
  auto r = central_reduction(self, devices, true);
  int acks = 0;
  REQUIRE(run(*r, self, {7, 3, &holders}, acks));
  CHECK(acks == 3);
  std::lock_guard<std::mutex> lock(log->m);
  std::sort(log->applied.begin(), log->applied.end());
  // 1 + 2 + 4 and 8 + 16 + 32, each to every holder of the layer, with the batch.
  const std::vector<std::tuple<int, int, float, double>> want = {{1, 0, 7.f, 64.0}, {2, 0, 7.f, 64.0}, {2, 1, 56.f, 64.0}};
  CHECK(log->applied == want);
  CHECK(log->tasks.empty());
  for (auto& [id, a] : devices) self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("a micro-batch no holder has is an error naming the layer, and nothing is applied", "[actor][reduction]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto log = std::make_shared<told>();
  std::map<int, device_handle> devices;
  devices[1] = holder(sys, 1, std::map<int, std::vector<std::pair<int, float>>>{{0, {{0, 1.f}}}, {1, {{0, 1.f}, {1, 1.f}}}}, log);
  const std::map<int, std::vector<int>> holders = {{0, {1}}, {1, {1}}};
  auto r = central_reduction(self, devices, true);
  int acks = 0;
  const auto st = run(*r, self, {3, 2, &holders}, acks);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.err().message, Catch::Contains("layer 0"));
  CHECK(acks == 0);
  std::lock_guard<std::mutex> lock(log->m);
  CHECK(log->applied.empty());
  for (auto& [id, a] : devices) self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("the peer reduction gives every holder its layer's task, waits for each, then commits", "[actor][reduction]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto log = std::make_shared<told>();
  std::map<int, device_handle> devices;
  for (int id : {4, 5, 6}) devices[id] = holder(sys, id, std::map<int, std::vector<std::pair<int, float>>>{}, log);
  const std::map<int, std::vector<int>> holders = {{0, {5, 4}}, {1, {6}}};
  auto r = peer_reduction(self, devices, false);
  int acks = 0;
  REQUIRE(run(*r, self, {11, 6, &holders}, acks));
  CHECK(acks == 3);
  std::lock_guard<std::mutex> lock(log->m);
  REQUIRE(log->tasks.size() == 3);
  for (const auto& t : log->tasks) {
    CHECK(t.tag == 11);
    CHECK(t.micro_batches == 6);
    CHECK_FALSE(t.exact);
    CHECK(t.holders == holders.at(t.layer));  // ranks in plan order
    CHECK(t.peers.size() == t.holders.size());
  }
  std::sort(log->commits.begin(), log->commits.end());
  const std::vector<std::tuple<int, std::int64_t, int, double>> want = {{4, 11, 0, 64.0}, {5, 11, 0, 64.0}, {6, 11, 1, 64.0}};
  CHECK(log->commits == want);
  for (auto& [id, a] : devices) self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("the peer reduction adds the layers of the same holders in one bucket: one task and one commit each", "[actor][reduction]") {
  fakes f{4, 5, 6};
  auto& self = f.self;
  auto& log = f.log;
  auto& devices = f.devices;
  // Layers 0 and 1 on devices 4 then 5; layer 2 on device 6; layer 3 on devices 4 and 5 in
  // the other order (other ranks: a bucket of its own).
  const std::map<int, std::vector<int>> holders = {{0, {4, 5}}, {1, {4, 5}}, {2, {6}}, {3, {5, 4}}};
  auto r = peer_reduction(self, devices, true);
  auto work = r->start({5, 8, &holders});
  const std::map<int, std::vector<int>> buckets = {{0, {0, 1}}, {2, {2}}, {3, {3}}};
  CHECK(work->buckets() == buckets);
  int acks = 0;
  REQUIRE(run(*r, self, {5, 8, &holders}, acks));
  CHECK(acks == 5);  // devices 4 and 5 twice (buckets 0 and 3), device 6 once
  std::lock_guard<std::mutex> lock(log->m);
  REQUIRE(log->tasks.size() == 5);
  for (const auto& t : log->tasks) {
    CHECK(t.layers == buckets.at(t.layer));
    CHECK(t.holders == holders.at(t.layer));
  }
  std::sort(log->commits.begin(), log->commits.end());
  const std::vector<std::tuple<int, std::int64_t, int, double>> want = {
      {4, 5, 0, 64.0}, {4, 5, 3, 64.0}, {5, 5, 0, 64.0}, {5, 5, 3, 64.0}, {6, 5, 2, 64.0}};
  CHECK(log->commits == want);
}

TEST_CASE("buckets fill from a run's top layer down until they reach bucket_bytes, a run of the same holders is cut alone",
          "[actor][reduction]") {
  fakes f{4, 5};
  auto& self = f.self;
  auto& devices = f.devices;
  // Five layers on devices 4 and 5; layer 5 on device 4 alone; layer 7 on 4 and 5 again
  // (not next to the others: a run of its own).
  const std::map<int, std::vector<int>> holders = {{0, {4, 5}}, {1, {4, 5}}, {2, {4, 5}}, {3, {4, 5}},
                                                   {4, {4, 5}}, {5, {4}},    {7, {4, 5}}};
  peer_options o;
  o.layer_bytes = {300, 500, 2000, 100, 100, 50, 10, 20};
  o.bucket_bytes = 1000;
  // From layer 4 down: 100, 200, then 2200 with layer 2 (closed); 500, 800 with layer 0 (the
  // run's end).
  CHECK(peer_reduction(self, devices, true, o)->start({1, 2, &holders})->buckets() ==
        std::map<int, std::vector<int>>{{0, {0, 1}}, {2, {2, 3, 4}}, {5, {5}}, {7, {7}}});
  o.bucket_bytes = 100;  // each layer reaches it alone
  CHECK(peer_reduction(self, devices, true, o)->start({1, 2, &holders})->buckets() ==
        std::map<int, std::vector<int>>{{0, {0}}, {1, {1}}, {2, {2}}, {3, {3}}, {4, {4}}, {5, {5}}, {7, {7}}});
  o.bucket_bytes = 0;  // no cap: one bucket per holder set
  CHECK(peer_reduction(self, devices, true, o)->start({1, 2, &holders})->buckets() ==
        std::map<int, std::vector<int>>{{0, {0, 1, 2, 3, 4}}, {5, {5}}, {7, {7}}});
}

TEST_CASE("a reduction asks a holder only once it is ready, and a layer's sum waits for all its holders", "[actor][reduction]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto log = std::make_shared<told>();
  std::map<int, device_handle> devices;
  devices[4] = holder(sys, 4, std::map<int, std::vector<std::pair<int, float>>>{{0, {{0, 1.f}}}}, log);
  devices[5] = holder(sys, 5, std::map<int, std::vector<std::pair<int, float>>>{{0, {{1, 2.f}}}}, log);
  devices[6] = holder(sys, 6, std::map<int, std::vector<std::pair<int, float>>>{{1, {{0, 4.f}, {1, 8.f}}}}, log);
  const std::map<int, std::vector<int>> holders = {{0, {4, 5}}, {1, {6}}};
  std::set<int> asked;  // central: the devices that sent their parts
  auto drain = [&](reduction_work& w) {  // every reply that comes within 200 ms
    for (bool more = true; more;)
      self->receive(
          [&](device_gradients& g) {
            asked.insert(g.device);
            w.on(g);
          },
          [&](const sum_held& h) { w.on(h); }, caf::after(std::chrono::milliseconds(200)) >> [&] { more = false; });
  };
  auto tasks = [&] {
    std::lock_guard<std::mutex> lock(log->m);
    std::vector<int> layers;
    for (const auto& t : log->tasks) layers.push_back(t.layer);
    std::sort(layers.begin(), layers.end());
    return layers;
  };
  SECTION("peer") {
    auto work = peer_reduction(self, devices, true)->start({9, 2, &holders});
    drain(*work);
    CHECK(tasks().empty());
    work->ready(6);  // layer 1's only holder: its task goes out
    drain(*work);
    CHECK(tasks() == std::vector<int>{1});
    work->ready(5);  // layer 0 still waits for device 4
    drain(*work);
    CHECK(tasks() == std::vector<int>{1});
    CHECK_FALSE(work->done());
    work->ready(4);
    drain(*work);
    CHECK(tasks() == std::vector<int>{0, 0, 1});
    CHECK(work->done());
  }
  SECTION("central") {
    auto work = central_reduction(self, devices, true)->start({9, 2, &holders});
    drain(*work);
    CHECK(asked.empty());
    work->ready(5);
    work->ready(6);
    drain(*work);
    CHECK(asked == std::set<int>{5, 6});
    CHECK_FALSE(work->done());
    work->ready(4);
    drain(*work);
    CHECK(work->done());
    REQUIRE(work->finish());
  }
  for (auto& [id, a] : devices) self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("the peer reduction at the start sends every bucket's task at once, and is done when every holder holds its sum",
          "[actor][reduction]") {
  fakes f{4, 5, 6};
  auto& self = f.self;
  auto& log = f.log;
  auto& devices = f.devices;
  const std::map<int, std::vector<int>> holders = {{0, {4, 5}}, {1, {4, 5}}, {2, {6}}};
  peer_options at_start;
  at_start.at_start = true;
  auto work = peer_reduction(self, devices, true, at_start)->start({9, 2, &holders});
  // No device said it is ready: the holders wait for their own stages instead.
  int held = 0;
  while (!work->done())
    self->receive([&](const sum_held& h) { held += h.tag == 9; work->on(h); },
                  caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no reply"); });
  CHECK(held == 3);  // devices 4 and 5 for the bucket {0, 1}, device 6 for layer 2
  {
    std::lock_guard<std::mutex> lock(log->m);
    std::vector<int> layers;
    for (const auto& t : log->tasks) layers.push_back(t.layer);
    std::sort(layers.begin(), layers.end());
    CHECK(layers == std::vector<int>{0, 0, 2});
  }
  work->ready(4);  // said after the tasks went out: nothing more is sent
  REQUIRE(work->finish());
  CHECK(work->apply(64, 1.0) == 3);
  for (int k = 0; k < 3; ++k)
    self->receive([&](const applied& a) { CHECK(a.tag == 9); }, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no ack"); });
  std::lock_guard<std::mutex> lock(log->m);
  CHECK(log->tasks.size() == 3);
}

TEST_CASE("the holders' sum runs the buckets the time model prices", "[actor][reduction]") {
  // Three groups over seven layers of uneven sizes: a two-stage, a three-stage and a
  // one-stage pipeline. The time model's segments (cut at every group's splits) and their
  // buckets against the runtime's, worked out from the holders as the driver keeps them.
  planner::model_profile m;
  const std::vector<double> mb = {0.5, 3, 2, 9, 1, 0.2, 6};
  for (double x : mb) m.layers.push_back({"l", 1e-3, 2e-3, 0, 1e3, x * (1 << 20), 1e3});
  planner::cluster_state c;
  for (int i = 0; i < 6; ++i) {
    planner::device_spec d;
    d.id = i;
    d.node = 0;
    c.devices.push_back(d);
  }
  c.tiers.same_node = {1e9, 0};  // no latency: the floor alone sizes the buckets
  for (double floor_mb : {0.1, 1.0, 4.0, 8.0, 100.0}) {  // 0.1: a bucket a layer
    planner::planner_config cfg;
    cfg.sum_bucket_bytes = floor_mb * (1 << 20);
    const planner::problem p(m, c, cfg);
    const auto a = planner::make_shape(p, {0, 1}, {0, 3, 7}, 4), b = planner::make_shape(p, {2, 3, 4}, {0, 1, 5, 7}, 4),
               g = planner::make_shape(p, {5}, {0, 7}, 4);
    std::set<std::pair<int, int>> model_spans;
    for (const auto& s : planner::sum_segments(p, {&a, &b, &g})) model_spans.insert({s.lo, s.hi});
    std::map<int, std::vector<int>> holders;  // as actors/driver_plans.cpp builds them
    for (const auto* gp : {&a, &b, &g})
      for (std::size_t j = 0; j < gp->devices.size(); ++j)
        for (int l = gp->splits[j]; l < gp->splits[j + 1]; ++l) holders[l].push_back(gp->devices[j]);
    peer_options o;
    o.bucket_bytes = static_cast<std::size_t>(cfg.sum_bucket_bytes);
    for (double x : mb) o.layer_bytes.push_back(static_cast<std::size_t>(x * (1 << 20)));
    std::set<std::pair<int, int>> runtime_spans;
    for (const auto& s : bucket_layers(holders, o)) runtime_spans.insert({s.lo, s.hi});
    INFO("floor " << floor_mb << " MiB");
    CHECK(runtime_spans == model_spans);
    CHECK(runtime_spans.size() >= 4);  // at least the segments: [0,1) [1,3) [3,5) [5,7)
  }
}

TEST_CASE("clipping: each reduction gives every layer's gradient norms, and every holder gets the factor", "[actor][reduction]") {
  // Central: the driver's own sums, 7 and 56 in 3 elements, at divisor 64: sqrt(3) x 7 / 64
  // and sqrt(3) x 56 / 64 (float32).
  {
    fakes f{};
    f.devices[1] = holder(f.sys, 1, std::map<int, std::vector<std::pair<int, float>>>{{0, {{0, 1.f}, {1, 2.f}}}}, f.log);
    f.devices[2] = holder(f.sys, 2, std::map<int, std::vector<std::pair<int, float>>>{{0, {{2, 4.f}}}, {1, {{0, 8.f}, {1, 16.f}, {2, 32.f}}}}, f.log);
    const std::map<int, std::vector<int>> holders = {{0, {1, 2}}, {1, {2}}};
    auto r = central_reduction(f.self, f.devices, true);
    auto work = r->start({7, 3, &holders, 0, 64.0});
    for (int id : {1, 2}) work->ready(id);
    while (!work->done())
      f.self->receive([&](device_gradients& g) { work->on(g); }, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no reply"); });
    REQUIRE(work->finish());
    const auto norms = work->norms();
    REQUIRE((norms.size() == 2 && norms.at(0).size() == 1 && norms.at(1).size() == 1));
    CHECK(norms.at(0)[0] == Approx(std::sqrt(3.0) * 7 / 64).epsilon(1e-6));
    CHECK(norms.at(1)[0] == Approx(std::sqrt(3.0) * 56 / 64).epsilon(1e-6));
    CHECK(work->apply(64, 0.25) == 3);
    for (int k = 0; k < 3; ++k) f.self->receive([](const applied&) {}, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no ack"); });
    std::lock_guard<std::mutex> lock(f.log->m);
    CHECK(f.log->scales == std::vector<double>(3, 0.25));
  }
  // Peer: the tasks ask for norms at the divisor, each layer's come from one of its holders'
  // answers (a stale answer's never), and the commit carries the factor.
  fakes f{4, 5, 6};
  const std::map<int, std::vector<int>> holders = {{0, {4, 5}}, {1, {4, 5}}, {2, {6}}};
  auto r = peer_reduction(f.self, f.devices, true);
  auto work = r->start({5, 8, &holders, 0, 64.0});
  for (int id : {4, 5, 6}) work->ready(id);
  while (!work->done())
    f.self->receive([&](const sum_held& h) { work->on(h); }, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no reply"); });
  REQUIRE(work->finish());
  const auto norms = work->norms();
  REQUIRE(norms.size() == 3);
  for (const auto& [l, n] : norms) {
    REQUIRE(n.size() == 2);
    CHECK(n[0] == static_cast<float>(l));  // the fake's: the layer, then the holder
    const auto& ids = holders.at(l);
    CHECK(std::find(ids.begin(), ids.end(), static_cast<int>(n[1])) != ids.end());
  }
  CHECK(work->apply(64, 0.5) == 3);
  for (int k = 0; k < 3; ++k) f.self->receive([](const applied&) {}, caf::after(std::chrono::seconds(10)) >> [&] { FAIL("no ack"); });
  std::lock_guard<std::mutex> lock(f.log->m);
  for (const auto& t : f.log->tasks) CHECK(t.norms_divisor == 64.0);
  CHECK(f.log->scales == std::vector<double>(3, 0.5));
}
