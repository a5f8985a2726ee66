// The order a plan diff is carried out in (planner/migration.hpp): hand-worked orders for a
// wave, a chain and a cycle; and on random plan pairs, replaying the order on sets, every move
// reads a layer its giver still holds, no device ever holds more than its old layers or its
// new ones (the memory bound the order exists for), and the end is exactly the new plan.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "common/rng.hpp"
#include "planner/migration.hpp"

using namespace dynapar;
using planner::migration_step;

namespace {

std::string word(const migration_step& s) {
  auto pairs = [](const std::vector<std::pair<int, int>>& d) {
    std::string w;
    for (const auto& [dev, l] : d) w += " d" + std::to_string(dev) + ":l" + std::to_string(l);
    return w;
  };
  auto moves = [](const std::vector<planner::layer_move>& m) {
    std::string w;
    for (const auto& mv : m) w += " l" + std::to_string(mv.layer) + ":d" + std::to_string(mv.from) + ">d" + std::to_string(mv.to);
    return w;
  };
  switch (s.what) {
    case migration_step::kind::drop: return "drop" + pairs(s.drops);
    case migration_step::kind::drop_last: return "drop_last" + pairs(s.drops);
    case migration_step::kind::move: return "move" + moves(s.moves);
    case migration_step::kind::stage: return "stage d" + std::to_string(s.from) + ":l" + std::to_string(s.layer) + " for" + moves(s.moves);
    case migration_step::kind::place_staged: return "place_staged";
  }
  return "?";
}

std::vector<std::string> order_of(const planner::plan_diff& d) {
  planner::migration_order o(d);
  std::vector<std::string> out;
  for (migration_step s; o.next(s);) out.push_back(word(s));
  CHECK(o.error().empty());
  return out;
}

using words = std::vector<std::string>;

}  // namespace

TEST_CASE("migration order: unread layers go first, a layer's giver drops it after the last move reading it", "[unit][planner]") {
  planner::plan_diff d;
  d.moves = {{3, 1, 0}};                // layer 3 from device 0 to 1
  d.drops = {{0, 3}, {0, 5}};           // device 0 gives up layers 3 and 5; nobody reads 5
  CHECK(order_of(d) == words{"drop d0:l5", "move l3:d0>d1", "drop_last d0:l3"});
}

TEST_CASE("migration order: a device takes layers only once it has sent and dropped what it gives", "[unit][planner]") {
  planner::plan_diff d;
  d.moves = {{2, 0, 4}, {1, 3, 0}};  // device 0 takes layer 2 from 4 and gives layer 1 to 3
  d.drops = {{0, 1}, {4, 2}};
  CHECK(order_of(d) == words{"move l1:d0>d3", "drop d0:l1", "move l2:d4>d0", "drop_last d4:l2"});
}

TEST_CASE("migration order: a cycle of trades stages one layer, placed once the rest moved", "[unit][planner]") {
  planner::plan_diff d;
  d.moves = {{1, 7, 6}, {2, 6, 7}};  // devices 6 and 7 swap layers 1 and 2
  d.drops = {{6, 1}, {7, 2}};
  planner::migration_order o(d);
  words got;
  for (migration_step s; o.next(s);) got.push_back(word(s));
  CHECK(got == words{"stage d6:l1 for l1:d6>d7", "drop d6:l1", "move l2:d7>d6", "drop d7:l2", "place_staged"});
  CHECK(o.dropped() == std::vector<std::pair<int, int>>{{6, 1}, {7, 2}});
}

TEST_CASE("migration order on random plan pairs: givers still hold, no device over its old or new layers, the new plan at the end",
          "[unit][planner]") {
  rng r(2024);
  const int layers = 5;
  auto random_plan = [&] {
    std::vector<int> ids{0, 1, 2, 3, 4, 5};
    for (int i = 5; i > 0; --i) std::swap(ids[i], ids[r.below(i + 1)]);
    planner::plan p;
    std::size_t next = 0;
    for (int g = 0, groups = 1 + static_cast<int>(r.below(2)); g < groups; ++g) {
      planner::group_plan gp;
      const int n = 1 + static_cast<int>(r.below(3));
      std::set<int> cuts{0, layers};
      while (static_cast<int>(cuts.size()) < n + 1) cuts.insert(1 + static_cast<int>(r.below(layers - 1)));
      gp.splits.assign(cuts.begin(), cuts.end());
      for (int j = 0; j < n; ++j) gp.devices.push_back(ids[next++]);
      gp.share = 8;
      p.groups.push_back(gp);
    }
    return p;
  };
  auto held_by = [&](const planner::plan& p) {
    std::map<int, std::set<int>> h;  // device -> layers
    for (const auto& g : p.groups)
      for (std::size_t j = 0; j < g.devices.size(); ++j)
        for (int l = g.splits[j]; l < g.splits[j + 1]; ++l) h[g.devices[j]].insert(l);
    return h;
  };
  int stages = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const auto from = random_plan(), to = random_plan();
    auto held = held_by(from);
    const auto old_held = held, new_held = held_by(to);
    const auto within = [&](int dev) {
      const auto& h = held[dev];
      auto subset = [&](const std::map<int, std::set<int>>& of) {
        const auto it = of.find(dev);
        return std::all_of(h.begin(), h.end(), [&](int l) { return it != of.end() && it->second.count(l); });
      };
      return subset(old_held) || subset(new_held);
    };
    planner::migration_order o(planner::diff(&from, to));
    std::vector<planner::layer_move> staged;
    for (migration_step s; o.next(s);) {
      INFO("trial " << trial << ": " << word(s));
      switch (s.what) {
        case migration_step::kind::drop:
        case migration_step::kind::drop_last:
          for (const auto& [dev, l] : s.drops) CHECK(held[dev].erase(l) == 1);
          break;
        case migration_step::kind::move:
          for (const auto& mv : s.moves) CHECK(held[mv.from].count(mv.layer) == 1);
          for (const auto& mv : s.moves) held[mv.to].insert(mv.layer);
          break;
        case migration_step::kind::stage:
          ++stages;
          CHECK(held[s.from].count(s.layer) == 1);
          staged.insert(staged.end(), s.moves.begin(), s.moves.end());
          break;
        case migration_step::kind::place_staged:
          for (const auto& mv : staged) held[mv.to].insert(mv.layer);
          break;
      }
      for (const auto& [dev, layers_held] : held) CHECK(within(dev));
    }
    CHECK(o.error().empty());
    for (auto it = held.begin(); it != held.end();) it = it->second.empty() ? held.erase(it) : std::next(it);
    CHECK(held == new_held);
  }
  CHECK(stages > 0);  // the random pairs include cycles
}
