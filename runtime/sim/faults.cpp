#include "sim/faults.hpp"

#include <algorithm>

#include "common/rng.hpp"

namespace dynapar::sim {

const char* name(fault_kind k) {
  switch (k) {
    case fault_kind::kill: return "kill";
    case fault_kind::slow: return "slow";
    case fault_kind::pause: return "pause";
    case fault_kind::partition: return "partition";
    case fault_kind::corrupt: return "corrupt";
  }
  return "?";
}

const char* name(fault_moment m) {
  switch (m) {
    case fault_moment::step: return "step";
    case fault_moment::replan: return "replan";
    case fault_moment::migration: return "migration";
    case fault_moment::sum: return "sum";
    case fault_moment::checkpoint: return "checkpoint";
    case fault_moment::evaluation: return "evaluation";
    case fault_moment::early: return "early";
    case fault_moment::shard: return "shard";
    case fault_moment::placement: return "placement";
    case fault_moment::joining: return "joining";
  }
  return "?";
}

bool moment_of(const std::string& text, fault_moment& out) {
  for (auto m : {fault_moment::step, fault_moment::replan, fault_moment::migration, fault_moment::sum, fault_moment::checkpoint,
                 fault_moment::evaluation, fault_moment::early, fault_moment::shard, fault_moment::placement, fault_moment::joining})
    if (text == name(m)) {
      out = m;
      return true;
    }
  return false;
}

std::vector<fault> expand(const fault_plan& plan, std::int64_t steps, std::uint64_t seed) {
  std::vector<fault> out = plan.at;
  const auto& r = plan.random;
  const std::int64_t lo = std::max<std::int64_t>(0, r.from_step);
  const std::int64_t hi = r.to_step < 0 ? steps - 1 : std::min(r.to_step, steps - 1);
  if (hi >= lo) {
    rng g(plan.seed ? plan.seed : seed ^ 0xc4a05ull);
    auto draw = [&](fault f, int n) {
      for (int k = 0; k < n; ++k) {
        f.step = lo + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(hi - lo + 1)));
        out.push_back(f);
      }
    };
    draw(fault{0, fault_kind::kill, -1, 1, 0, 0}, r.kills);
    draw(fault{0, fault_kind::pause, -1, 1, 0, r.pause_s}, r.pauses);
    draw(fault{0, fault_kind::slow, -1, r.slow_factor, r.slow_steps, 0}, r.slows);
  }
  std::stable_sort(out.begin(), out.end(), [](const fault& a, const fault& b) { return a.step < b.step; });
  return out;
}

}  // namespace dynapar::sim
