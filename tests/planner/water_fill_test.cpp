// Linear solving against its definition and against brute force.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/rng.hpp"
#include "planner/cluster.hpp"
#include "planner/water_fill.hpp"

using namespace dynapar;
using namespace dynapar::planner;

TEST_CASE("water-filling equalises finish times of the groups it uses", "[unit][planner]") {
  rng r(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(r.below(8));
    std::vector<affine_group> gs(n);
    for (auto& g : gs) g = {r.uniform(1e-3, 1e-1), r.uniform(0, 0.5), unlimited};
    const double batch = r.uniform(10, 1000);
    auto f = water_fill(gs, batch);
    REQUIRE(f);
    double sum = 0;
    for (int g = 0; g < n; ++g) {
      sum += f->shares[g];
      if (f->shares[g] > 1e-9) {
        CHECK(gs[g].alpha * f->shares[g] + gs[g].beta == Approx(f->finish).epsilon(1e-9));
      } else {
        CHECK(gs[g].beta >= f->finish - 1e-9);  // dropped only if it could not finish sooner
      }
    }
    CHECK(sum == Approx(batch).epsilon(1e-9));
  }
}

TEST_CASE("water-filling respects memory caps", "[unit][planner]") {
  std::vector<affine_group> gs = {{0.001, 0, 10}, {0.01, 0, unlimited}};
  auto f = water_fill(gs, 100);
  REQUIRE(f);
  CHECK(f->shares[0] == Approx(10));
  CHECK(f->shares[1] == Approx(90));
  CHECK(f->finish == Approx(0.9));
}

TEST_CASE("caps that cannot hold the batch are infeasible, not a plan", "[unit][planner]") {
  auto f = water_fill({{0.1, 0, 5}, {0.1, 0, 5}}, 11);
  REQUIRE_FALSE(f);
  CHECK(f.err().code == "infeasible");
  auto i = integer_shares({[](int b) { return b * 1.0; }}, {3}, 4);
  REQUIRE_FALSE(i);
  CHECK(i.err().code == "infeasible");
}

namespace {
// Minimum makespan over every integer share vector (the independent reference).
double brute_force(const std::vector<std::function<double(int)>>& t, const std::vector<int>& caps, int batch) {
  double best = INFINITY;
  std::vector<int> b(t.size(), 0);
  std::function<void(std::size_t, int)> rec = [&](std::size_t g, int left) {
    if (g + 1 == t.size()) {
      if (left > caps[g]) return;
      b[g] = left;
      double m = 0;
      for (std::size_t k = 0; k < t.size(); ++k) m = std::max(m, b[k] > 0 ? t[k](b[k]) : 0.0);
      best = std::min(best, m);
      return;
    }
    for (int x = 0; x <= std::min(left, caps[g]); ++x) {
      b[g] = x;
      rec(g + 1, left - x);
    }
  };
  rec(0, batch);
  return best;
}
}  // namespace

TEST_CASE("integer shares equal brute force over all share vectors", "[unit][planner]") {
  rng r(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(r.below(4));
    const int batch = 1 + static_cast<int>(r.below(14));
    std::vector<std::function<double(int)>> t;
    std::vector<int> caps;
    int cap_sum = 0;
    for (int g = 0; g < n; ++g) {
      // Pipeline-like step functions: (ceil(b/u) - 1) R + S, monotone in b.
      const double R = r.uniform(0.1, 2), S = R + r.uniform(0, 3);
      const int u = 1 + static_cast<int>(r.below(4));
      t.push_back([=](int b) { return b <= 0 ? 0.0 : (std::ceil(static_cast<double>(b) / u) - 1) * R + S * std::min(b, u) / u; });
      caps.push_back(static_cast<int>(r.below(static_cast<std::uint64_t>(batch) + 2)));
      cap_sum += caps.back();
    }
    auto shares = integer_shares(t, caps, batch);
    if (cap_sum < batch) {
      CHECK_FALSE(shares);
      continue;
    }
    REQUIRE(shares);
    int sum = 0;
    double makespan = 0;
    for (int g = 0; g < n; ++g) {
      CHECK((*shares)[g] >= 0);
      CHECK((*shares)[g] <= caps[g]);
      sum += (*shares)[g];
      if ((*shares)[g] > 0) makespan = std::max(makespan, t[g]((*shares)[g]));
    }
    CHECK(sum == batch);
    CHECK(makespan == Approx(brute_force(t, caps, batch)).epsilon(1e-12));
  }
}
