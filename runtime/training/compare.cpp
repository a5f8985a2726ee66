#include "training/compare.hpp"

#include <algorithm>

#include "logging/logging.hpp"

namespace dynapar::training {

result<std::vector<policy_run>> compare_policies(const train_settings& s, const std::vector<std::string>& policies,
                                                 std::int64_t steps, const std::map<std::int64_t, double>& ours,
                                                 const train_fn& train) {
  if (!s.controller) return make_error("bad_flag", "--compare needs a job re-planned online (replan_every > 0)");
  const auto n = std::min(steps, s.steps);
  const std::int64_t first = n > 1 ? 1 : 0;
  const double counted = static_cast<double>(n - first);
  double mine = 0;
  for (const auto& [step, time] : ours)
    if (step >= first && step < n) mine += time / counted;
  std::vector<policy_run> out;
  for (const auto& name : policies) {
    auto other = s;
    other.steps = n;
    other.controller->policy = name;
    other.controller->core.budget.horizon_slots = static_cast<int>((n + s.slot_steps - 1) / s.slot_steps);
    other.resume.reset();
    other.controller->restore.reset();
    logging::get("train")->info("side by side: {} trains steps 0-{} on the same devices", name, n - 1);
    train_callbacks cb;
    std::map<std::int64_t, std::pair<double, double>> times;  // step -> time, cost (a re-run step: its last attempt)
    cb.on_step = [&](const step_record& r) { times[r.step] = {r.time_s, r.cost}; };
    auto run = train(other, cb);
    if (!run) return make_error(run.err().code, "--compare " + name + ": " + run.err().message);
    policy_run p{name, n, 0, mine, 0, 0};
    for (const auto& [step, tc] : times) {
      if (step < first) continue;
      p.mean_step_time_s += tc.first / counted;
      p.avg_cost += tc.second / counted;
    }
    p.speedup = mine > 0 ? p.mean_step_time_s / mine : 0.0;
    out.push_back(p);
  }
  return out;
}

}  // namespace dynapar::training
