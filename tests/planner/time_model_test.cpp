// The time and memory model against formulas worked by hand.
#include <catch2/catch.hpp>

#include <numeric>

#include "planner/buckets.hpp"
#include "planner/evaluate.hpp"
#include "planner/time_model.hpp"

using namespace dynapar;
using namespace dynapar::planner;

namespace {
model_profile uniform_model(int layers, double fwd, double params = 1e6, double act = 1e3) {
  model_profile m;
  for (int l = 0; l < layers; ++l) m.layers.push_back({"l", fwd, 2 * fwd, 0, act, params, act});
  return m;
}
cluster_state same_node_devices(int n, double speed = 1) {
  cluster_state c;
  for (int i = 0; i < n; ++i) {
    device_spec d;
    d.id = i;
    d.speed = speed;
    d.node = 0;
    c.devices.push_back(d);
  }
  c.tiers.same_node = {1e18, 0};  // free links: pure pipeline timing
  return c;
}
}  // namespace

TEST_CASE("GPipe and 1F1B flush time follows the bubble formula (M + n - 1) t", "[unit][planner]") {
  for (auto sched : {schedule_kind::gpipe, schedule_kind::one_f_one_b}) {
    const int n = 4, u = 2, share = 16;  // M = 8 micro-batches of 2
    const auto m = uniform_model(8, 1e-3);
    const auto c = same_node_devices(n);
    planner_config cfg;
    cfg.schedule = sched;
    problem p(m, c, cfg);
    auto g = make_shape(p, {0, 1, 2, 3}, {0, 2, 4, 6, 8}, u);
    REQUIRE(g.feasible);
    const double t_stage = u * 2 * 3e-3;  // two layers, fwd + bwd = 3 ms per sample
    CHECK(group_time(p, g, share) == Approx((8 + n - 1) * t_stage).epsilon(1e-9));
  }
}

TEST_CASE("a slower device stretches its stage by its speed", "[unit][planner]") {
  const auto m = uniform_model(2, 1e-3);
  auto c = same_node_devices(2);
  c.devices[1].speed = 0.5;
  problem p(m, c, {});
  auto g = make_shape(p, {0, 1}, {0, 1, 2}, 1);
  CHECK(g.stage_s[0] == Approx(3e-3));
  CHECK(g.stage_s[1] == Approx(6e-3));
  CHECK(g.bottleneck == 1);
}

TEST_CASE("boundary transfers cost activation plus gradient over the link", "[unit][planner]") {
  const auto m = uniform_model(2, 1e-3, 1e6, 5e6);
  auto c = same_node_devices(2);
  c.tiers.same_node = {1e9, 1e-4};
  problem p(m, c, {});
  // 2 * (u * 5 MB / 1 GB/s + 0.1 ms) with u = 4.
  CHECK(link_time(p, 0, 1, 1, 4) == Approx(2 * (4 * 5e6 / 1e9 + 1e-4)));
}

TEST_CASE("two identical data-parallel groups sum gradients by a ring all-reduce", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3, 25e6);
  auto c = same_node_devices(2);
  c.tiers.same_node = {10e9, 1e-5};
  planner_config cfg;
  cfg.overlap_sums = false;  // one ring for the whole segment
  problem p(m, c, cfg);
  auto a = make_shape(p, {0}, {0, 4}, 8), b = make_shape(p, {1}, {0, 4}, 8);
  // 2 (G-1)/G * 100 MB / 10 GB/s + 2 (G-1) lat with G = 2.
  CHECK(sync_time(p, {&a, &b}) == Approx(100e6 / 10e9 + 2 * 1e-5));
  CHECK(sync_time(p, {&a}) == 0);
  // Overlapped, in buckets of at least 1 MiB: each 25 MB layer is one, and pays the latency.
  p.cfg.overlap_sums = true;
  CHECK(sync_time(p, {&a, &b}) == Approx(100e6 / 10e9 + 4 * 2 * 1e-5));
}

TEST_CASE("segment-wise sums: a device pays only for the segments it holds", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3, 10e6);
  auto c = same_node_devices(4);
  c.tiers.same_node = {1e9, 0};
  problem p(m, c, {});
  // Group A: 0 holds [0,1), 1 holds [1,4). Group B: 2 holds [0,3), 3 holds [3,4).
  auto a = make_shape(p, {0, 1}, {0, 1, 4}, 1), b = make_shape(p, {2, 3}, {0, 3, 4}, 1);
  // Segments [0,1) [1,3) [3,4): device 1 holds [1,3) and [3,4) = 30 MB; device 2 holds [0,1) and [1,3) = 30 MB.
  CHECK(sync_time(p, {&a, &b}) == Approx(30e6 / 1e9));
}

TEST_CASE("sums overlapped with backward start as each holder's stage finishes", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3, 10e6);
  auto c = same_node_devices(4);
  c.tiers.same_node = {1e9, 0};
  planner_config cfg;
  cfg.overlap_sums = true;
  cfg.sum_bucket_bytes = 1e18;  // a segment in one bucket: the stage level alone
  problem p(m, c, cfg);
  // The segments of the test above: [0,1) on {0, 2} 10 ms, [1,3) on {1, 2} 20 ms, [3,4) on
  // {1, 3} 10 ms.
  auto a = make_shape(p, {0, 1}, {0, 1, 4}, 1), b = make_shape(p, {2, 3}, {0, 3, 4}, 1);
  const auto segs = sum_segments(p, {&a, &b});
  REQUIRE(segs.size() == 3);
  CHECK(sums_end(segs, {}) == Approx(30e-3));  // back to back: sync_time
  // Stage 0 of both groups ready at 100 ms, stage 1 of A at 50 ms, of B at 60 ms. Device 1:
  // [3,4) at 60 ms to 70, [1,3) (waits for device 2's stage) 100 to 120. Device 2: [1,3) and
  // [0,1) both ready at 100 ms, the later layers first: 100 to 120, 120 to 130.
  const std::vector<std::vector<double>> ready = {{0.1, 0.05}, {0.1, 0.06}};
  CHECK(sums_end(segs, ready) == Approx(0.13));
  // What the step pays beyond its pipelines: 30 ms after the slowest at 100 ms (device 2's
  // segments both wait for its stage 0), 5 ms after one at 125 ms.
  CHECK(exposed_sync(p, segs, ready, 0.1) == Approx(0.03));
  CHECK(exposed_sync(p, segs, ready, 0.125) == Approx(0.005));
  p.cfg.overlap_sums = false;
  CHECK(exposed_sync(p, segs, ready, 0.1) == Approx(30e-3));
}

TEST_CASE("a bucket's sum starts once backward has passed its layers", "[unit][planner]") {
  // Two single-device groups (data parallel) of 4 layers, fwd 1 ms and bwd 2 ms a sample a
  // layer, 1 ms fixed a micro-batch; layer 3 holds 10 MB, the others 0.1 MB; 1 GB/s, no
  // latency. Buckets of 8 MiB (the default) from the top: {3} (10 ms), {0, 1, 2} (0.3 ms).
  auto m = uniform_model(4, 1e-3, 0.1e6);
  m.layers[3].param_bytes = 10e6;
  for (auto& l : m.layers) l.fixed_s = 1e-3;
  auto c = same_node_devices(2);
  c.tiers.same_node = {1e9, 0};
  c.devices[1].speed = 0.5;
  problem p(m, c, {});
  auto a = make_shape(p, {0}, {0, 4}, 4), b = make_shape(p, {1}, {0, 4}, 4);
  // Shares 12 (micro-batches 4, 4, 4) and 6 (4, then 2): the last micro-batch's backward
  // below layer 3 is 3 layers x 2 ms x x samples + half of their 3 ms fixed, over the speed.
  const auto segs = sum_segments(p, {&a, &b}, {12, 6});
  REQUIRE(segs.size() == 2);
  CHECK(segs[0].lo == 3);
  CHECK(segs[0].hi == 4);
  CHECK(segs[1].lo == 0);
  CHECK(segs[1].hi == 3);
  CHECK(segs[0].seconds == Approx(10e-3));
  CHECK(segs[0].lead_s[0] == Approx(4 * 6e-3 + 1.5e-3));
  CHECK(segs[0].lead_s[1] == Approx((2 * 6e-3 + 1.5e-3) / 0.5));
  CHECK(segs[1].lead_s[0] == 0);  // the stage's first layer: done when the stage is
  // Both groups end at 100 ms: layer 3's sum starts when the later of them has passed it
  // (100 - 25.5 ms on device 0, 100 - 27 ms on device 1), 10 ms, then the rest 0.3 ms at 100.
  const std::vector<std::vector<double>> ready = {{0.1}, {0.1}};
  CHECK(sums_end(segs, ready) == Approx(0.1003));
  CHECK(exposed_sync(p, segs, ready, 0.1) == Approx(0.3e-3));
  // Without shares no lead: the stage level, layer 3 from 100 ms.
  CHECK(sums_end(sum_segments(p, {&a, &b}), ready) == Approx(0.1103));
}

TEST_CASE("buckets grow until the ring's latency is a small part of their time", "[unit][planner]") {
  // Two single-device groups, four layers of 2 MB, 1 GB/s, buckets of 1 MiB (not the 8 MiB
  // default, which alone would make [2,4) and [0,2)). Without latency each layer is a
  // bucket. With 0.625 ms a hop the ring's latency is 1.25 ms, and a bucket must take 4 times
  // that to move (5 MB): [1,4) from the top, then [0,1).
  const auto m = uniform_model(4, 1e-3, 2e6);
  auto c = same_node_devices(2);
  c.tiers.same_node = {1e9, 0};
  planner_config cfg;
  cfg.sum_bucket_bytes = 1 << 20;
  problem p(m, c, cfg);
  auto a = make_shape(p, {0}, {0, 4}, 4), b = make_shape(p, {1}, {0, 4}, 4);
  CHECK(sum_segments(p, {&a, &b}).size() == 4);
  c.tiers.same_node = {1e9, 0.625e-3};
  problem slow(m, c, cfg);
  const auto segs = sum_segments(slow, {&a, &b});
  REQUIRE(segs.size() == 2);
  CHECK(segs[0].lo == 1);
  CHECK(segs[0].hi == 4);
  CHECK(segs[0].seconds == Approx(6e6 / 1e9 + 1.25e-3));
  CHECK(segs[1].lo == 0);
  CHECK(segs[1].hi == 1);
}

TEST_CASE("a stage finishes the step's backward before the stages in front of it", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3, 1e6, 1e3);  // backward 2 ms a sample a layer
  auto c = same_node_devices(3);
  c.tiers.same_node = {1e9, 0};
  c.devices[1].speed = 0.5;
  problem p(m, c, {});
  auto g = make_shape(p, {0, 1, 2}, {0, 2, 3, 4}, 2);
  // Stage 1 finishes when the last micro-batch (2 samples) still has stage 0's backward ahead
  // (2 x 2 layers x 2 ms) and the gradient's way back (2 samples x 1 KB / 1 GB/s); stage 2
  // also stage 1's backward at half speed (2 x 1 x 2 ms / 0.5) and its link.
  const auto r = stage_ready(p, g, 16, 1.0);
  REQUIRE(r.size() == 3);
  CHECK(r[0] == Approx(1.0));
  CHECK(r[1] == Approx(1.0 - 8e-3 - 2e-6));
  CHECK(r[2] == Approx(1.0 - 8e-3 - 2e-6 - 8e-3 - 2e-6));
  CHECK(stage_ready(p, g, 1, 1.0)[1] == Approx(1.0 - 4e-3 - 1e-6));  // a single smaller micro-batch
}

TEST_CASE("every holder's optimizer step: the slowest device's updates add to the step", "[unit][planner]") {
  auto m = uniform_model(4, 1e-3, 1e3);
  for (int l = 0; l < 4; ++l) m.layers[l].update_s = 1e-3 * (l + 1);  // 1, 2, 3, 4 ms
  auto c = same_node_devices(3);
  c.devices[2].speed = 0.25;
  planner_config cfg;
  cfg.batch = 16;
  problem p(m, c, cfg);
  // Group A: device 0 holds every layer (10 ms at speed 1). Group B: device 1 holds [0,3)
  // (6 ms), device 2 at a quarter holds [3,4) (4 ms / 0.25 = 16 ms): the slowest is 16 ms.
  auto a = make_shape(p, {0}, {0, 4}, 4), b = make_shape(p, {1, 2}, {0, 3, 4}, 4);
  CHECK(update_time(p, {&a, &b}) == Approx(16e-3));
  CHECK(update_time(p, {&a}) == Approx(10e-3));
  plan pl;
  pl.groups = {{{0}, {0, 4}, 8, 4}, {{1, 2}, {0, 3, 4}, 8, 4}};
  auto r = evaluate(p, pl, nullptr, {});
  REQUIRE(r);
  CHECK(r->update_s == Approx(16e-3));
  CHECK(r->batch_time_s == Approx(r->compute_s + r->sync_s + 16e-3 + r->migration_s));
}

TEST_CASE("migration moves only layers a device did not hold, with optimizer state", "[unit][planner]") {
  auto m = uniform_model(4, 1e-3, 10e6);
  m.optimizer_state_factor = 1;
  auto c = same_node_devices(2);
  c.tiers.same_node = {1e9, 0};
  problem p(m, c, {});
  plan prev;
  prev.groups.push_back({{0, 1}, {0, 2, 4}, 8, 1});
  holdings h(p, &prev);
  // Device 0 now holds [0,3): it lacks layer 2, 10 MB of parameters + 10 MB of momentum.
  auto [sec, bytes] = h.bring(p, 0, 0, 3);
  CHECK(bytes == Approx(20e6));
  CHECK(sec == Approx(20e6 / 1e9));
  CHECK(h.bring(p, 1, 2, 4).second == 0);
}

TEST_CASE("memory: GPipe caps the share, 1F1B caps the micro-batch", "[unit][planner]") {
  auto m = uniform_model(2, 1e-3, 1e6, 1e6);  // 1 MB kept per sample per layer
  auto c = same_node_devices(2);
  for (auto& d : c.devices) d.memory_bytes = 2e6 + 10e6;  // params (no optimizer state) + 10 samples of activations
  planner_config cfg;
  cfg.schedule = schedule_kind::gpipe;
  problem pg(m, c, cfg);
  auto g = make_shape(pg, {0, 1}, {0, 1, 2}, 2);
  REQUIRE(g.feasible);
  CHECK(g.cap == Approx(10));  // 5 micro-batches of 2 (1 MB + 1 MB params leaves 11 MB, floor to 5 of 2 MB)
  cfg.schedule = schedule_kind::one_f_one_b;
  problem p1(m, c, cfg);
  CHECK(make_shape(p1, {0, 1}, {0, 1, 2}, 5).feasible);       // stage 0 keeps 2 micro-batches of 5
  CHECK_FALSE(make_shape(p1, {0, 1}, {0, 1, 2}, 6).feasible); // 12 MB does not fit
}

TEST_CASE("plan explanation adds up and names the bottleneck", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3);
  auto c = same_node_devices(2);
  c.devices[1].speed = 0.25;
  c.devices[0].price_per_s = 1;
  c.devices[1].price_per_s = 2;
  budgets b;
  b.cost_per_slot = 2.0;
  problem p(m, c, {}, b);
  plan pl;
  pl.groups.push_back({{0, 1}, {0, 3, 4}, 256, 8});
  auto r = evaluate(p, pl, nullptr, {3.0, {}});
  REQUIRE(r);
  CHECK(r->batch_time_s == Approx(r->compute_s + r->sync_s + r->migration_s));
  CHECK(r->cost == Approx(3 * r->batch_time_s));
  // V T / T_floor + (Q / C_bar) C.
  CHECK(r->score == Approx(p.cfg.v * r->batch_time_s / r->floor_s + 3.0 / 2.0 * r->cost));
  CHECK(r->groups[0].bottleneck == "stage 1 (device 1)");
  CHECK(r->floor_s == Approx(256 * 4 * 3e-3 / 1.25));
}

TEST_CASE("plans that break the model's rules are errors, not numbers", "[unit][planner]") {
  const auto m = uniform_model(4, 1e-3);
  auto c = same_node_devices(2);
  c.devices[1].available = false;
  problem p(m, c, {});
  plan pl;
  pl.groups.push_back({{0, 1}, {0, 2, 4}, 256, 8});
  auto r = evaluate(p, pl, nullptr, {});
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("not available") != std::string::npos);
  pl.groups[0] = {{0}, {0, 4}, 255, 8};
  CHECK(evaluate(p, pl, nullptr, {}).err().message.find("sum to 255") != std::string::npos);
  pl.groups[0] = {{0}, {0, 3}, 256, 8};
  CHECK(evaluate(p, pl, nullptr, {}).err().code == "bad_plan");
}

TEST_CASE("a plan of several steps pays its migration once: plans are scored by their mean step", "[unit][planner]") {
  auto m = uniform_model(4, 1e-3, 10e6);
  m.optimizer_state_factor = 0;
  auto c = same_node_devices(2);
  c.tiers.same_node = {1e9, 0};
  plan prev, next;
  prev.groups.push_back({{0}, {0, 4}, 8, 8});
  next.groups.push_back({{1}, {0, 4}, 8, 8});  // device 1 must receive all 4 layers: 40 MB, 40 ms
  for (int k : {1, 20}) {
    planner_config cfg;
    cfg.batch = 8;
    cfg.plan_steps = k;
    problem p(m, c, cfg);
    auto r = evaluate(p, next, &prev, {});
    REQUIRE(r);
    CHECK(r->migration_s == Approx(40e6 / 1e9));
    CHECK(r->batch_time_s == Approx(r->compute_s + r->sync_s + r->update_s + r->migration_s));  // the first step
    // V T / T_floor with T = compute + sums + updates + migration / k.
    const double mean_step = r->compute_s + r->sync_s + r->update_s + 0.04 / k;
    CHECK(r->score == Approx(p.cfg.v * mean_step / r->floor_s));
  }
}

TEST_CASE("bucket_spans cuts from the top down, each bucket the fewest layers that reach the floor", "[unit][planner]") {
  // Worked by hand: layers of 3, 1, 1, 5, 2 MB, floor 4 MB: [3,5) (2 + 5), then [0,3) (1 + 1 + 3).
  const std::vector<double> mb = {3, 1, 1, 5, 2};
  const auto bytes = [&](int a, int b) { return std::accumulate(mb.begin() + a, mb.begin() + b, 0.0); };
  CHECK(bucket_spans(0, 5, 4, bytes) == std::vector<layer_span>{{3, 5}, {0, 3}});
  CHECK(bucket_spans(0, 5, 0, bytes) == std::vector<layer_span>{{4, 5}, {3, 4}, {2, 3}, {1, 2}, {0, 1}});
  CHECK(bucket_spans(0, 5, unlimited, bytes) == std::vector<layer_span>{{0, 5}});
  CHECK(bucket_spans(1, 3, 4, bytes) == std::vector<layer_span>{{1, 3}});  // the run's end keeps what is left
  CHECK(bucket_spans(2, 2, 4, bytes).empty());
  // Against brute force on every run and floor: the spans tile the run top down, and each but
  // the bottom one reaches the floor and would not without its lowest layer.
  for (int lo = 0; lo <= 5; ++lo)
    for (int hi = lo; hi <= 5; ++hi)
      for (double least : {0.5, 1.0, 2.0, 4.0, 6.5, 12.0, 100.0}) {
        const auto spans = bucket_spans(lo, hi, least, bytes);
        int top = hi;
        for (std::size_t k = 0; k < spans.size(); ++k) {
          CHECK(spans[k].hi == top);
          CHECK(spans[k].lo < spans[k].hi);
          if (k + 1 < spans.size()) {
            CHECK(bytes(spans[k].lo, spans[k].hi) >= least);
            CHECK(bytes(spans[k].lo + 1, spans[k].hi) < least);
          }
          top = spans[k].lo;
        }
        CHECK(top == lo);
      }
}
