// Within-step dispatch: the split of the rest against every split by brute force, what a probe
// tells against its definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "schedule/dispatch.hpp"

using namespace dynapar::schedule;

namespace {
double makespan(const std::vector<prospect>& d, const std::vector<int>& units, int unit) {
  double end = 0;
  for (std::size_t k = 0; k < d.size(); ++k)
    if (units[k] > 0) end = std::max(end, d[k].free_s + units[k] * unit * d[k].per_sample_s);
  return end;
}
}  // namespace

TEST_CASE("dispatch_units reaches the least makespan of every split", "[unit][dispatch]") {
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> free(0, 3), per(0.1, 2);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 4, units = trial % 9, unit = 1 + trial % 3;
    std::vector<prospect> d(n);
    for (auto& p : d) p = {free(gen), per(gen)};
    const auto got = dispatch_units(d, units, unit);
    INFO("trial " << trial);
    REQUIRE(got.size() == d.size());
    CHECK(std::accumulate(got.begin(), got.end(), 0) == units);
    double best = 1e300;
    std::vector<int> split(n, 0);
    std::function<void(int, int)> all = [&](int k, int left) {
      if (k == n - 1) {
        split[k] = left;
        best = std::min(best, makespan(d, split, unit));
        return;
      }
      for (int u = 0; u <= left; ++u) {
        split[k] = u;
        all(k + 1, left - u);
      }
    };
    all(0, units);
    CHECK(makespan(d, got, unit) == Approx(best).epsilon(1e-12));
  }
}

TEST_CASE("a slowed device gets less of the rest, in proportion to its pace", "[unit][dispatch]") {
  // Four devices free at once, one at 2.5 times the time a sample: a continuous split gives
  // it 1/(3 * 2.5 + 1) of the rest.
  const std::vector<prospect> d{{1, 1}, {1, 1}, {1, 2.5}, {1, 1}};
  const auto got = dispatch_units(d, 170, 1);
  CHECK(got[2] == Approx(170 / 8.5).margin(1));
  CHECK(got[0] == Approx(170 * 2.5 / 8.5).margin(1));
}

TEST_CASE("what a probe tells: its whole time, its first forward, or a bound", "[unit][dispatch]") {
  probe_progress p;
  p.samples = 30;
  p.first_samples = 10;
  p.done_s = p.compute_s = 0.6;
  auto q = prospect_of(p, 0.7, 3);
  CHECK(q.free_s == Approx(0.6));
  CHECK(q.per_sample_s == Approx(0.02));
  p.done_s = -1;
  p.forward_s = 0.05;  // forward of 10 samples: 0.015 s a sample forward and backward
  q = prospect_of(p, 0.2, 3);
  CHECK(q.per_sample_s == Approx(0.015));
  CHECK(q.free_s == Approx(0.45));
  p.forward_s = -1;  // nothing by 0.2 s: a sample takes at least 0.2 * 3 / 10 s
  q = prospect_of(p, 0.2, 3);
  CHECK(q.per_sample_s == Approx(0.06));
  CHECK(q.free_s == Approx(1.8));
  // Its task went out 0.15 s late: it has run 0.05 s only, and ends from there.
  p.started_s = 0.15;
  q = prospect_of(p, 0.2, 3);
  CHECK(q.per_sample_s == Approx(0.015));
  CHECK(q.free_s == Approx(0.6));
  p.forward_s = 0.05;
  CHECK(prospect_of(p, 0.2, 3).free_s == Approx(0.6));
}

TEST_CASE("a probe is whole units, at least one and one short of the share", "[unit][dispatch]") {
  CHECK(probe_samples(86, 0.33, 1) == 28);
  CHECK(probe_samples(64, 0.33, 8) == 16);   // 8 units: 2 of them
  CHECK(probe_samples(16, 0.33, 8) == 8);    // 2 units: at least one
  CHECK(probe_samples(16, 0.9, 8) == 8);     // and one left for the rest
  CHECK(probe_samples(8, 0.33, 8) == 0);     // one unit: no part
  CHECK(probe_samples(86, 0, 1) == 0);       // off
}

TEST_CASE("probes only where two groups take part, the pool in whole units, the last short", "[unit][dispatch]") {
  CHECK(probes({86, 0, 42}, 0.33, 1) == std::vector<int>{28, 0, 13});
  CHECK(probes({86, 0, 8}, 0.33, 8) == std::vector<int>{0, 0, 0});  // one group alone
  // 20 samples as 3 units of 8 (two to device 0, one to device 1, ties to the first); the
  // pool is laid out in device order, so the last device's part ends short: 16 and 4.
  CHECK(dispatch_samples({{0, 1}, {0, 1}}, 20, 8) == std::vector<int>{16, 4});
}

TEST_CASE("a probe's pace is weighed against the device's last step by the trust in it", "[unit][dispatch]") {
  probe_progress p;
  p.samples = 10;
  p.first_samples = 10;
  p.done_s = p.compute_s = 0.2;  // 0.02 s a sample in the probe
  p.prior_s = 0.01;              // 0.01 s a sample in its last rest
  CHECK(prospect_of(p, 0.2, 3, 1).per_sample_s == Approx(0.02));
  CHECK(prospect_of(p, 0.2, 3, 0).per_sample_s == Approx(0.01));
  CHECK(prospect_of(p, 0.2, 3, 0.5).per_sample_s == Approx(std::sqrt(0.02 * 0.01)));  // geometric
  CHECK(prospect_of(p, 0.2, 3, 0.5).free_s == Approx(0.2));
  // Not heard from by 0.02 s: the bound (0.02 * 3 / 10 = 0.006 s a sample) is under the prior,
  // which stands; by 0.05 s the bound (0.015) is over it, and stands instead.
  p.done_s = -1;
  CHECK(prospect_of(p, 0.02, 3, 0.5).per_sample_s == Approx(0.01));
  CHECK(prospect_of(p, 0.02, 3, 0.5).free_s == Approx(0.1));
  CHECK(prospect_of(p, 0.05, 3, 0.5).per_sample_s == Approx(0.015));
}

TEST_CASE("the trust in probes: the prior's share of the two errors' variances", "[unit][dispatch]") {
  pace_noise n;
  CHECK(n.trust() == 1);  // nothing seen
  CHECK(n.prior(7) == -1);
  n.observe(7, 1.2, 1.0);
  CHECK(n.trust() == 1);  // no prior seen yet
  CHECK(n.prior(7) == 1.0);  // the rest's pace is the next step's prior
  // Rests alternating between 1 and e^0.1 (so each prior misses by a factor e^0.1), probes
  // off by e^0.2 either way: variances 0.04 and 0.01 every step after the first, so the
  // smoothed ones are exactly those, and the trust 0.01 / 0.05.
  n = pace_noise{};
  for (int k = 0; k < 30; ++k) {
    const double rest = std::exp(0.1 * (k % 2)), sign = k % 3 ? 1 : -1;
    n.observe(7, rest * std::exp(sign * 0.2), rest);
  }
  CHECK(n.trust() == Approx(0.2));
  // A steady device on a noisy machine: the prior never misses, so no trust in the probe.
  pace_noise steady;
  for (int k = 0; k < 5; ++k) steady.observe(3, k % 2 ? 1.3 : 0.8, 1.0);
  CHECK(steady.trust() == Approx(0));
  // Load bursts step by step, probes exact: all trust in the probe.
  pace_noise bursty;
  for (int k = 0; k < 5; ++k) bursty.observe(3, k % 2 ? 2.0 : 1.0, k % 2 ? 2.0 : 1.0);
  CHECK(bursty.trust() == Approx(1));
  // Nonsense measures change nothing.
  bursty.observe(3, 0, 1);
  bursty.observe(3, 1, -1);
  CHECK(bursty.trust() == Approx(1));
}
