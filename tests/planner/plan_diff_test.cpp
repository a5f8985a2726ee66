// A plan diff, applied to the old placements, gives exactly the new ones (checked on random
// plan pairs by replaying the moves and drops on sets), and sources are old holders.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "common/rng.hpp"
#include "planner/plan.hpp"

using namespace dynapar;

namespace {
using placement = std::set<std::pair<int, int>>;  // (device, layer)

placement of(const planner::plan& p) {
  placement out;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j < g.devices.size(); ++j)
      for (int l = g.splits[j]; l < g.splits[j + 1]; ++l) out.insert({g.devices[j], l});
  return out;
}

// Random valid plan over devices 0..7 for `layers` layers.
planner::plan random_plan(rng& r, int layers) {
  std::vector<int> ids{0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 7; i > 0; --i) std::swap(ids[i], ids[r.below(i + 1)]);
  planner::plan p;
  std::size_t next = 0;
  const int groups = 1 + static_cast<int>(r.below(3));
  for (int g = 0; g < groups; ++g) {
    planner::group_plan gp;
    const int n = 1 + static_cast<int>(r.below(2));
    gp.splits.push_back(0);
    for (int j = 0; j < n; ++j) gp.devices.push_back(ids[next++]);
    if (n == 2) gp.splits.push_back(1 + static_cast<int>(r.below(layers - 1)));
    gp.splits.push_back(layers);
    gp.share = 8;
    p.groups.push_back(gp);
  }
  return p;
}
}  // namespace

TEST_CASE("replaying a plan diff turns the old placements into the new ones") {
  rng r(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto a = random_plan(r, 5), b = random_plan(r, 5);
    const auto d = planner::diff(&a, b);
    placement now = of(a);
    const placement before = now;
    for (const auto& m : d.moves) {
      REQUIRE(now.count({m.to, m.layer}) == 0);
      REQUIRE(before.count({m.from, m.layer}) == 1);  // the source held the layer
      now.insert({m.to, m.layer});
    }
    for (const auto& [dev, layer] : d.drops) REQUIRE(now.erase({dev, layer}) == 1);
    CHECK(now == of(b));
    std::set<int> used_a, used_b;
    for (const auto& [dev, l] : of(a)) used_a.insert(dev);
    for (const auto& [dev, l] : of(b)) used_b.insert(dev);
    for (int id : d.joined) CHECK((used_b.count(id) && !used_a.count(id)));
    for (int id : d.left) CHECK((used_a.count(id) && !used_b.count(id)));
  }
}

TEST_CASE("a first plan is all fresh layers, the same plan is no change, sources follow the cost") {
  planner::plan p;
  p.groups.push_back({{3, 1}, {0, 2, 4}, 8, 8});
  const auto first = planner::diff(nullptr, p);
  CHECK(first.moves.size() == 4);
  for (const auto& m : first.moves) CHECK(m.from == -1);
  CHECK(planner::diff(&p, p).empty());
  planner::plan q = p;
  q.groups.push_back({{5}, {0, 4}, 8, 8});
  // Layers 0-1 live on 3, layers 2-3 on 1; device 5 prefers device 1 where both could serve.
  const auto d = planner::diff(&p, q, [](int from, int) { return from == 1 ? 0.0 : 1.0; });
  REQUIRE(d.moves.size() == 4);
  for (const auto& m : d.moves) CHECK(m.from == (m.layer < 2 ? 3 : 1));
  CHECK(d.joined == std::vector<int>{5});
  CHECK(d.left.empty());
}

TEST_CASE("a diff over wiped devices moves from survivors only and refills the wiped") {
  rng r(11);
  int refills = 0, orphans = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto a = random_plan(r, 5), b = random_plan(r, 5);
    std::set<int> wiped;
    for (int id = 0; id < 8; ++id)
      if (r.below(3) == 0) wiped.insert(id);
    const auto d = planner::diff(&a, b, {}, wiped);
    // What the devices really hold: the old placements less the wiped devices'.
    placement now;
    for (const auto& [dev, l] : of(a))
      if (!wiped.count(dev)) now.insert({dev, l});
    const placement before = now;
    for (const auto& m : d.moves) {
      REQUIRE(now.count({m.to, m.layer}) == 0);
      if (m.from < 0) {  // only where no survivor holds the layer
        for (const auto& [dev, l] : before) REQUIRE(l != m.layer);
        ++orphans;
      } else {
        REQUIRE(before.count({m.from, m.layer}) == 1);
      }
      if (wiped.count(m.to) && of(a).count({m.to, m.layer})) ++refills;
      now.insert({m.to, m.layer});
    }
    for (const auto& [dev, layer] : d.drops) REQUIRE(now.erase({dev, layer}) == 1);
    CHECK(now == of(b));
  }
  CHECK(refills > 0);  // the random pairs did exercise both cases
  CHECK(orphans > 0);
  // The same plan after its device 3 was lost and came back: 3's layers move to it again.
  planner::plan p;
  p.groups.push_back({{3, 1}, {0, 2, 4}, 8, 8});
  p.groups.push_back({{5}, {0, 4}, 8, 8});
  const auto d = planner::diff(&p, p, {}, {3});
  REQUIRE(d.moves.size() == 2);
  for (const auto& m : d.moves) CHECK((m.to == 3 && m.from == 5 && m.layer < 2));
  CHECK(d.drops.empty());
}
