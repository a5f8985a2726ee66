// The discrete-event step simulation against pipeline timings worked by hand.
#include <catch2/catch.hpp>

#include "planner/builtin_profiles.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"
#include "planner/time_model.hpp"
#include "sim/des.hpp"

using namespace dynapar;
using namespace dynapar::planner;

namespace {
model_profile uniform(int layers, double fwd, double bwd, double act = 0) {
  model_profile m;
  for (int l = 0; l < layers; ++l) m.layers.push_back({"l", fwd, bwd, 0, act, 1e6, 0});
  return m;
}
cluster_state devices(int n, double bw = 1e18, double lat = 0) {
  cluster_state c;
  for (int i = 0; i < n; ++i) {
    device_spec d;
    d.id = i;
    d.node = 0;
    c.devices.push_back(d);
  }
  c.tiers.same_node = {bw, lat};
  return c;
}
}  // namespace

TEST_CASE("DES: balanced GPipe and 1F1B flush in (M + n - 1)(t_f + t_b)", "[unit][sim]") {
  for (auto kind : {schedule_kind::gpipe, schedule_kind::one_f_one_b}) {
    for (int n : {1, 2, 4}) {
      for (int m : {1, 3, 8}) {
        const auto model = uniform(4, 1e-3, 2e-3);
        const auto c = devices(n);
        problem p(model, c, {});
        group_plan g;
        for (int j = 0; j < n; ++j) g.devices.push_back(j);
        for (int j = 0; j <= n; ++j) g.splits.push_back(4 * j / n);
        g.micro_batch = 2;
        g.share = 2 * m;
        const double tf = 2 * (4 / n) * 1e-3, tb = 2 * tf;
        INFO("n=" << n << " m=" << m);
        CHECK(sim::simulate_pipeline(p, kind, g, nullptr, nullptr) == Approx((m + n - 1) * (tf + tb)).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("DES: a bottleneck stage sets the pace, (M - 1) t_max + sum of stages", "[unit][sim]") {
  // Stage 1 twice as slow: GPipe's forward phase is (M - 1) f_max + sum f, backward likewise.
  const auto model = uniform(2, 1e-3, 2e-3);
  auto c = devices(2);
  c.devices[1].speed = 0.5;
  problem p(model, c, {});
  group_plan g{{0, 1}, {0, 1, 2}, 4, 1};
  const double expect = (4 - 1) * 2e-3 + (1e-3 + 2e-3) + (4 - 1) * 4e-3 + (2e-3 + 4e-3);
  CHECK(sim::simulate_pipeline(p, schedule_kind::gpipe, g, nullptr, nullptr) == Approx(expect));
}

TEST_CASE("DES: a link transfer sits between the stages of one micro-batch", "[unit][sim]") {
  const auto model = uniform(2, 1e-3, 2e-3, 1e6);  // 1 MB per sample over a 1 GB/s link: 1 ms
  const auto c = devices(2, 1e9, 0);
  problem p(model, c, {});
  group_plan g{{0, 1}, {0, 1, 2}, 1, 1};
  // f0, send, f1, b1, send back, b0.
  CHECK(sim::simulate_pipeline(p, schedule_kind::one_f_one_b, g, nullptr, nullptr) == Approx(1e-3 + 1e-3 + 1e-3 + 2e-3 + 1e-3 + 2e-3));
}

TEST_CASE("DES and the planner's model agree on pipelines the model describes exactly", "[unit][sim]") {
  const auto model = uniform(8, 1e-3, 2e-3);
  const auto c = devices(4);
  planner_config cfg;
  cfg.schedule = schedule_kind::gpipe;
  cfg.batch = 32;
  problem p(model, c, cfg);
  plan pl;
  pl.schedule = schedule_kind::gpipe;
  pl.groups.push_back({{0, 1}, {0, 4, 8}, 16, 4});
  pl.groups.push_back({{2, 3}, {0, 4, 8}, 16, 4});
  const auto step = sim::simulate_step(p, pl, nullptr);
  const auto rep = evaluate(p, pl, nullptr, {});
  REQUIRE(rep);
  CHECK(step.compute_s == Approx(rep->compute_s));
  CHECK(step.sync_s == Approx(rep->sync_s));
}

TEST_CASE("DES: each stage's backward ends where the time model says", "[unit][sim]") {
  for (auto kind : {schedule_kind::gpipe, schedule_kind::one_f_one_b})
    for (int n : {2, 4})
      for (int m : {1, 3, 8}) {
        const auto model = uniform(4, 1e-3, 2e-3);
        const auto c = devices(n);
        planner_config cfg;
        cfg.schedule = kind;
        problem p(model, c, cfg);
        group_plan g;
        for (int j = 0; j < n; ++j) g.devices.push_back(j);
        for (int j = 0; j <= n; ++j) g.splits.push_back(4 * j / n);
        g.micro_batch = 2;
        g.share = 2 * m;
        std::vector<double> finish;
        const double flush = sim::simulate_pipeline(p, kind, g, nullptr, nullptr, &finish);
        // By hand: balanced stages of tf and tb a micro-batch flush in (m + n - 1)(tf + tb);
        // the last micro-batch's backward then walks from the last stage to the first, which
        // ends the step, so stage j is done j backwards before the end.
        const double tf = 2 * (4 / n) * 1e-3, tb = 2 * tf;
        INFO("n=" << n << " m=" << m);
        CHECK(flush == Approx((m + n - 1) * (tf + tb)).epsilon(1e-9));
        REQUIRE(finish.size() == static_cast<std::size_t>(n));
        for (int j = 0; j < n; ++j) CHECK(finish[j] == Approx(flush - j * tb).epsilon(1e-9));
      }
}

TEST_CASE("DES: the last stages' sums hide under the first stages' backward", "[unit][sim]") {
  // Layers 2 and 3 hold 20 MB each, layers 0 and 1 1 MB: two groups of two stages. Stage 1 is
  // done 4 ms (stage 0's backward of the last sample) before the pipeline ends, and layer 3's
  // bucket (20 MB over 1 GB/s: 20 ms) is ready 2 ms before that (layer 2's backward of the
  // last sample): 6 ms before the end. Layer 2's bucket follows it on the same devices, 34 ms
  // after the end; [0,2) (2 MB, one bucket under 1 MiB a layer) takes 2 ms from the end.
  // Without the overlap every sum waits for the end: 40 ms on the devices holding [2,4).
  model_profile model = uniform(4, 1e-3, 2e-3);
  model.layers[2].param_bytes = model.layers[3].param_bytes = 20e6;
  const auto c = devices(4, 1e9, 0);
  planner_config cfg;
  cfg.batch = 8;
  cfg.overlap_sums = true;
  problem on(model, c, cfg);
  cfg.overlap_sums = false;
  problem off(model, c, cfg);
  plan pl;
  pl.groups.push_back({{0, 1}, {0, 2, 4}, 4, 1});
  pl.groups.push_back({{2, 3}, {0, 2, 4}, 4, 1});
  const auto a = sim::simulate_step(on, pl, nullptr), b = sim::simulate_step(off, pl, nullptr);
  CHECK(a.compute_s == Approx(b.compute_s));
  CHECK(b.sync_s == Approx(40e-3));
  CHECK(a.sync_s == Approx(34e-3));
  CHECK(a.time_s == Approx(b.time_s - 6e-3));
  // The planner's model of the same plan says the same.
  const auto ra = evaluate(on, pl, nullptr, {}), rb = evaluate(off, pl, nullptr, {});
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(ra->sync_s == Approx(34e-3));
  CHECK(rb->sync_s == Approx(40e-3));
}

TEST_CASE("DES: a 1F1B round trip over a slow link sets the pace, and 1F1B-deep hides it", "[unit][sim]") {
  // Two stages of 3 ms a micro-batch, 1 ms each way between them: one micro-batch's loop
  // (stage, link, stage, link back) is 8 ms. 1F1B has 2 micro-batches in that loop: 4 ms
  // each, above either stage. 1F1B-deep has 3 (8 / 3 < 3 ms): the stages set the pace.
  const auto model = uniform(2, 1e-3, 2e-3);
  const auto c = devices(2, 1e18, 1e-3);
  for (auto kind : {schedule_kind::one_f_one_b, schedule_kind::deep_1f1b}) {
    INFO(to_string(kind));
    planner_config cfg;
    cfg.schedule = kind;
    problem p(model, c, cfg);
    auto flush = [&](int m) {
      group_plan g{{0, 1}, {0, 1, 2}, m, 1};
      return sim::simulate_pipeline(p, kind, g, nullptr, nullptr);
    };
    const double cycle = (flush(40) - flush(20)) / 20;
    CHECK(cycle == Approx(kind == schedule_kind::one_f_one_b ? 4e-3 : 3e-3));
    CHECK(make_shape(p, {0, 1}, {0, 1, 2}, 1).bottleneck_s == Approx(cycle));
  }
}

TEST_CASE("DES: within-step dispatch moves a slowed device's rest to the others", "[unit][sim][dispatch]") {
  // Four single-device groups with equal shares planned for equal speeds; in this step device
  // 2 runs at 0.4. Without dispatch it holds the step up 2.5x; with it, the probes (a third)
  // run as planned and the rest goes by pace. Reference worked by hand: a sample takes 3 ms
  // (1 forward, 2 backward) at speed 1, so the probes end at 24 ms (7.5 * 8 = 60 ms on device
  // 2, whose first forward, 20 ms, is known by then); the 4 x 16 = 64 samples left are
  // given one by one to whoever ends it first: (24 + 3k) ms on the others, (60 + 7.5k) ms on
  // device 2. The 64 earliest of those ends: 20 on each other device (up to 84 ms), 3 on device 2
  // (67.5, 75, 82.5 ms) and one more at 87 ms: the step takes 87 ms against 2.5 * 72 = 180.
  const auto model = uniform(1, 1e-3, 2e-3);
  auto c = devices(4);
  c.devices[2].speed = 0.4;
  problem truth(model, c, {});
  plan pl;
  for (int g = 0; g < 4; ++g) pl.groups.push_back({{g}, {0, 1}, 24, 24});
  const auto off = sim::simulate_step(truth, pl, nullptr);
  CHECK(off.compute_s == Approx(0.180));
  const auto shares = sim::dispatched(truth, pl, {true, 1.0 / 3, false});
  REQUIRE(shares.size() == 4);
  for (const auto& s : shares) CHECK(s.probe == 8);
  CHECK(shares[2].rest == 3);
  CHECK(shares[0].rest + shares[1].rest + shares[3].rest == 61);
  for (int g : {0, 1, 3}) CHECK((shares[g].rest == 20 || shares[g].rest == 21));
  const auto on = sim::simulate_step(truth, pl, nullptr, {true, 1.0 / 3, false});
  CHECK(on.compute_s == Approx(0.087));
  // Every sample is computed once: the stage measures count the share.
  double samples = 0;
  for (const auto& st : on.stages) samples += st.samples;
  CHECK(samples == 96);
}
