#include "sim/chaos.hpp"

#include <algorithm>
#include <iterator>

#include "common/rng.hpp"

namespace dynapar::sim {

chaos_experiment draw_chaos(const chaos_config& c, std::uint64_t seed) {
  chaos_experiment x;
  x.seed = seed;
  rng g(seed * 0x9e3779b97f4a7c15ULL + 0xc4a05);
  // Faults from step 2 (after the first plan and its migration) to two steps before the end.
  const std::int64_t lo = 2, hi = std::max<std::int64_t>(lo, c.steps - 3);
  auto step = [&] { return lo + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(hi - lo + 1))); };
  auto count = [&](int most) { return static_cast<int>(g.below(static_cast<std::uint64_t>(most) + 1)); };
  const int kills = count(c.max_kills), hangs = count(c.max_hangs), slows = count(c.max_slows),
            partitions = count(c.max_partitions);
  for (int k = 0; k < kills; ++k) x.faults.push_back({step(), fault_kind::kill, -1, 1, 0, 0});
  for (int k = 0; k < hangs; ++k) x.faults.push_back({step(), fault_kind::pause, -1, 1, 0, c.hang_s});
  for (int k = 0; k < slows; ++k)
    x.faults.push_back({step(), fault_kind::slow, -1, g.uniform(0.15, 0.5), 1 + static_cast<int>(g.below(20)), 0});
  for (int k = 0; k < partitions; ++k) x.faults.push_back({step(), fault_kind::partition, -1, 1, 0, c.hang_s});
  std::stable_sort(x.faults.begin(), x.faults.end(), [](const fault& a, const fault& b) { return a.step < b.step; });
  const int slots = static_cast<int>(c.steps / std::max(1, c.slot_steps));
  if (c.leaves && !c.devices.empty() && c.devices.size() > 1 && slots >= 4 && g.uniform() < 0.5) {
    const int dev = c.devices[g.below(c.devices.size())];
    const int at = 1 + static_cast<int>(g.below(static_cast<std::uint64_t>(slots - 3)));
    x.events.push_back({at, event_kind::leave, dev});
    x.events.push_back({at + 1 + static_cast<int>(g.below(2)), event_kind::join, dev});
  }
  if (c.restarts && g.uniform() < 1.0 / 3) x.restart_after = c.steps / 3 + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(std::max<std::int64_t>(1, c.steps / 3))));
  // Drawn last, so that a seed's other faults are those it drew before moments existed. Half
  // the kills wait for a hard moment (a re-plan that moves layers, the migration itself, the
  // holders' sums, a checkpoint, its shards being written, the window between a commit and
  // the step started with it, an evaluation on the devices, a device joining); a quarter of the
  // runs lose two devices in one step.
  if (c.hard_moments) {
    const fault_moment hard[] = {fault_moment::replan, fault_moment::migration, fault_moment::sum,        fault_moment::checkpoint,
                                 fault_moment::shard,  fault_moment::early,     fault_moment::evaluation, fault_moment::joining};
    for (auto& f : x.faults)
      if (f.kind == fault_kind::kill && g.uniform() < 0.5) f.moment = hard[g.below(std::size(hard))];
    if (c.max_kills > 0 && g.uniform() < 0.25) {
      const auto at = step();
      const auto pos = std::upper_bound(x.faults.begin(), x.faults.end(), at, [](std::int64_t s, const fault& f) { return s < f.step; });
      x.faults.insert(pos, 2, fault{at, fault_kind::kill, -1, 1, 0, 0});
    }
    // A fifth of the runs lose a device while the first plan's layers are placed.
    if (c.max_kills > 0 && g.uniform() < 0.2) {
      x.faults.insert(x.faults.begin(), fault{0, fault_kind::kill, -1, 1, 0, 0});
      x.faults.front().moment = fault_moment::placement;
    }
  }
  return x;
}

std::string chaos_experiment::describe() const {
  int n[5] = {0, 0, 0, 0, 0};
  for (const auto& f : faults) ++n[static_cast<int>(f.kind)];
  std::string out;
  auto add = [&](int k, const char* one, const char* many) {
    if (k == 0) return;
    out += (out.empty() ? "" : ", ") + std::to_string(k) + " " + (k == 1 ? one : many);
  };
  add(n[static_cast<int>(fault_kind::kill)], "kill", "kills");
  std::string at;
  for (const auto& f : faults)
    if (f.moment != fault_moment::step) at += (at.empty() ? "" : "/") + std::string(name(f.moment));
  if (!at.empty()) out += " (" + at + ")";
  add(n[static_cast<int>(fault_kind::pause)], "hang", "hangs");
  add(n[static_cast<int>(fault_kind::slow)], "slow-down", "slow-downs");
  add(n[static_cast<int>(fault_kind::partition)], "partition", "partitions");
  for (std::size_t i = 0; i + 1 < events.size(); i += 2)
    out += (out.empty() ? "" : ", ") + std::string("d") + std::to_string(events[i].device) + " away slots " +
           std::to_string(events[i].slot) + "-" + std::to_string(events[i + 1].slot);
  if (restart_after >= 0) out += (out.empty() ? "" : ", ") + std::string("restart after ~") + std::to_string(restart_after);
  return out.empty() ? "none" : out;
}

}  // namespace dynapar::sim
