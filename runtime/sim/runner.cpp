#include "sim/runner.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/rng.hpp"
#include "control/controller.hpp"
#include "planner/policy.hpp"
#include "sim/des.hpp"
#include "sim/world.hpp"

namespace dynapar::sim {
namespace {

bool uses_any(const planner::plan& p, const std::vector<int>& ids) {
  for (const auto& g : p.groups)
    for (int d : g.devices)
      if (std::find(ids.begin(), ids.end(), d) != ids.end()) return true;
  return false;
}

bool same_structure(const planner::plan& a, const planner::plan& b) {
  if (a.groups.size() != b.groups.size()) return false;
  for (std::size_t g = 0; g < a.groups.size(); ++g)
    if (a.groups[g].devices != b.groups[g].devices || a.groups[g].splits != b.groups[g].splits) return false;
  return true;
}

// The world's measurement error: each measured time off by a relative normal deviate,
// drawn in the order the estimates read them.
control::measurement measured(const step_outcome& step, double noise, rng& r) {
  control::measurement m;
  m.stages = step.stages;
  m.links = step.links;
  for (auto& st : m.stages)
    if (st.compute_s > 0) st.compute_s *= std::max(0.05, 1 + r.normal(0, noise));
  for (auto& l : m.links)
    if (l.bytes > 0) l.busy_s *= std::max(0.05, 1 + r.normal(0, noise));
  return m;
}

}  // namespace

summary summarise(const std::string& policy, const std::vector<slot_record>& slots, double budget) {
  summary s;
  s.policy = policy;
  s.slots = static_cast<int>(slots.size());
  s.budget = budget;
  std::vector<double> times;
  double floor = 0, pred_err = 0;
  for (const auto& r : slots) {
    if (!r.ok) continue;
    ++s.ok_slots;
    times.push_back(r.batch_time_s);
    s.avg_cost += r.cost;
    s.avg_energy_j += r.energy_j;
    floor += r.floor_s;
    pred_err += std::abs(r.predicted_s - r.batch_time_s) / r.batch_time_s;
    s.replans += r.replanned;
    s.failures += r.failed;
    s.bytes_migrated += r.bytes_migrated;
    s.final_queue = r.cost_queue;
  }
  if (times.empty()) {  // no slot ran: nothing was met (error says why)
    s.meets_budget = false;
    return s;
  }
  const double n = static_cast<double>(times.size());
  for (double t : times) s.mean_batch_time_s += t / n;
  std::sort(times.begin(), times.end());
  s.p95_batch_time_s = times[std::min(times.size() - 1, static_cast<std::size_t>(std::ceil(0.95 * n)) - 1)];
  s.avg_cost /= n;
  s.avg_energy_j /= n;
  s.mean_floor_s = floor / n;
  s.efficiency = s.mean_floor_s / s.mean_batch_time_s;
  s.prediction_error = pred_err / n;
  s.meets_budget = budget < 0 || s.avg_cost <= budget * 1.01;
  return s;
}

result<run_result> run_policy(const scenario& s, const std::string& policy_name, const std::function<void(int)>& on_slot) {
  auto pol = planner::make_policy(policy_name);
  if (!pol) return pol.err();
  // A fixed micro-batch stands for an exact job: the pool's units are its micro-batches.
  const step::layout_options dispatch{(*pol)->dispatches(), s.cfg.dispatch_probe, s.cfg.micro_batch > 0};
  world w(s);
  control::controller_config cc;
  cc.profile = s.model;
  cc.cluster = s.cluster;
  cc.planner = s.cfg;
  cc.budget = s.budget;
  cc.budget.horizon_slots = s.slots;  // a scenario's length is known: pace the budget over it
  cc.smoothing = s.estimate_smoothing;
  cc.hysteresis = s.hysteresis;
  cc.explain = false;
  cc = control::paced(std::move(cc), {1, s.plan_lifetime_slots, false});  // a simulated slot is one step
  control::controller ctl(cc, std::move(*pol));
  rng noise(s.seed * 0x9e3779b97f4a7c15ULL + 17);
  run_result out;
  std::string first_error;
  for (int t = 0; t < s.slots; ++t) {
    const planner::cluster_state& truth_c = w.at(t);
    const auto hidden = w.failing(t);
    ctl.announce(truth_c);
    planner::problem truth(s.model, truth_c, s.cfg, s.budget);
    slot_record rec;
    rec.slot = t;
    rec.floor_s = truth.floor_s();
    // The plan that last ran: the controller's plan in force before this slot's decision.
    const std::optional<planner::plan> prev = ctl.current();
    const planner::plan* prev_p = prev ? &*prev : nullptr;
    auto decided = ctl.decide(t, hidden);
    if (decided && uses_any(decided->plan, hidden)) {
      // The step dies part-way: the work until then and the detection are lost, then the
      // policy re-plans without the failed device and the step runs again.
      rec.failed = true;
      // The lost attempt ran on the cluster as it was when the step began: the failing
      // devices still in it.
      planner::cluster_state before_c = truth_c;
      for (auto& d : before_c.devices)
        if (std::find(hidden.begin(), hidden.end(), d.id) != hidden.end()) d.available = true;
      const planner::problem before(s.model, before_c, s.cfg, s.budget);
      const double lost = simulate_step(before, decided->plan, prev_p, dispatch).time_s * noise.uniform() + s.detect_s;
      ctl.revoke("a device failed during the step");
      decided = ctl.decide(t);
      rec.batch_time_s += lost;
    }
    if (!decided) {
      if (first_error.empty()) first_error = "slot " + std::to_string(t) + ": " + decided.err().message;
      rec.cost_queue = ctl.queues().cost;
      out.slots.push_back(rec);
      if (on_slot) on_slot(t);
      continue;
    }
    const planner::plan& pl = decided->plan;
    rec.predicted_s = decided->predicted_s;
    const step_outcome step = simulate_step(truth, pl, prev_p, dispatch);
    rec.ok = true;
    rec.batch_time_s += step.time_s;
    rec.predicted_s += rec.batch_time_s - step.time_s;  // a failure's loss is not the planner's error
    // Priced on the step's true figures; the controller then measures them with noise.
    control::measurement priced;
    priced.stages = step.stages;
    priced.time_s = rec.batch_time_s;
    const auto device = [&](int id) -> const planner::device_spec& { return truth_c.devices[truth.links.index_of(id)]; };
    control::price(priced, [&](int id) { return device(id).price_per_s; }, [&](int id) { return device(id).power_w; });
    control::measurement m = measured(step, s.measurement_noise, noise);
    m.energy_j = priced.energy_j;
    for (const auto& st : step.stages) rec.devices.push_back(st.device);
    rec.devices_used = static_cast<int>(rec.devices.size());
    for (const auto& [id, j] : priced.energy_j) rec.energy_j += j;
    rec.cost = priced.cost;
    rec.bytes_migrated = step.bytes_migrated;
    rec.groups = static_cast<int>(pl.groups.size());
    rec.replanned = prev && !same_structure(*prev, pl);
    m.time_s = rec.batch_time_s;
    m.cost = rec.cost;
    ctl.observe(m);
    ctl.close_slot();
    rec.cost_queue = ctl.queues().cost;
    out.slots.push_back(rec);
    if (on_slot) on_slot(t);
  }
  out.sum = summarise(policy_name, out.slots, s.budget.has_cost() ? s.budget.cost_per_slot : -1);
  out.sum.error = first_error;
  return out;
}

}  // namespace dynapar::sim
