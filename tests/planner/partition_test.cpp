// The partitioner against exhaustive enumeration of every split, priced independently.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/rng.hpp"
#include "planner/partition.hpp"

using namespace dynapar;
using namespace dynapar::planner;

namespace {
struct case_data {
  model_profile model;
  cluster_state cluster;
  planner_config cfg;
};

case_data random_case(rng& r) {
  case_data c;
  const int L = 2 + static_cast<int>(r.below(8));
  for (int l = 0; l < L; ++l) {
    layer_profile lp;
    lp.fwd_s = r.uniform(1e-4, 1e-3);
    lp.bwd_s = r.uniform(1e-4, 2e-3);
    lp.fixed_s = r.uniform(0, 1e-4);
    lp.act_bytes = r.uniform(1e3, 1e6);
    lp.param_bytes = r.uniform(1e6, 1e7);
    lp.act_mem_bytes = r.uniform(1e3, 1e6);
    c.model.layers.push_back(lp);
  }
  c.model.optimizer_state_factor = static_cast<double>(r.below(3));
  const int n = 1 + static_cast<int>(r.below(std::min(4, L)));
  for (int i = 0; i < n; ++i) {
    device_spec d;
    d.id = i;
    d.speed = r.uniform(0.5, 4);
    d.memory_bytes = r.uniform(5e6, 6e7);
    d.node = static_cast<int>(r.below(2));
    c.cluster.devices.push_back(d);
  }
  c.cluster.tiers.same_node = {r.uniform(1e8, 1e10), r.uniform(0, 1e-4)};
  c.cluster.tiers.same_rack = {r.uniform(1e7, 1e9), r.uniform(0, 1e-3)};
  c.cfg.schedule = r.below(2) ? schedule_kind::gpipe : schedule_kind::one_f_one_b;
  return c;
}

// Stage j of n on layers [lo, hi): its time, or infinity if it does not fit in memory.
double stage_cost(const case_data& c, int dev, int lo, int hi, int u, int inflight) {
  double work = 0, fixed = 0, params = 0, mem = 0;
  for (int l = lo; l < hi; ++l) {
    const auto& lp = c.model.layers[l];
    work += lp.fwd_s + lp.bwd_s;
    fixed += lp.fixed_s;
    params += lp.param_bytes;
    mem += lp.act_mem_bytes;
  }
  const auto& d = c.cluster.devices[dev];
  if ((1 + c.model.optimizer_state_factor) * params + inflight * u * mem > d.memory_bytes) return INFINITY;
  return (u * work + fixed) / d.speed;
}

double link_cost(const case_data& c, int a, int b, int cut, int u) {
  const auto& t = c.cluster.devices[a].node == c.cluster.devices[b].node ? c.cluster.tiers.same_node : c.cluster.tiers.same_rack;
  return 2 * (u * c.model.layers[cut - 1].act_bytes / t.bw + t.lat);
}

double bottleneck(const case_data& c, const std::vector<int>& splits, int u) {
  const int n = static_cast<int>(splits.size()) - 1;
  double r = 0;
  for (int j = 0; j < n; ++j) {
    const int inflight = (c.cfg.schedule == schedule_kind::gpipe || n == 1) ? 1 : n - j;
    r = std::max(r, stage_cost(c, j, splits[j], splits[j + 1], u, inflight));
    if (j + 1 < n) r = std::max(r, link_cost(c, j, j + 1, splits[j + 1], u));
  }
  return r;
}
}  // namespace

TEST_CASE("the partitioner equals exhaustive enumeration", "[unit][planner]") {
  rng r(3);
  int feasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto c = random_case(r);
    const int L = c.model.num_layers(), n = static_cast<int>(c.cluster.devices.size());
    const int u = 1 + static_cast<int>(r.below(4));
    double best = INFINITY;
    std::vector<int> splits(n + 1);
    splits[0] = 0;
    splits[n] = L;
    std::function<void(int)> rec = [&](int j) {
      if (j == n) {
        best = std::min(best, bottleneck(c, splits, u));
        return;
      }
      for (int cut = splits[j - 1] + 1; cut <= L - (n - j); ++cut) {
        splits[j] = cut;
        rec(j + 1);
      }
    };
    if (n > 1) rec(1); else best = bottleneck(c, splits, u);
    problem p(c.model, c.cluster, c.cfg);
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    auto got = partition_layers(p, devs, u);
    if (!std::isfinite(best)) {
      CHECK_FALSE(got);
      continue;
    }
    REQUIRE(got);
    ++feasible;
    CHECK(bottleneck(c, *got, u) == Approx(best).epsilon(1e-12));
  }
  CHECK(feasible > 100);  // the comparison is not vacuous
}
