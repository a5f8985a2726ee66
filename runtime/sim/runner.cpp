#include "sim/runner.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "planner/evaluate.hpp"
#include "planner/lyapunov.hpp"
#include "planner/policy.hpp"
#include "sim/des.hpp"
#include "sim/estimator.hpp"
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
  world w(s);
  estimator est(s.cluster, s.model, s.estimate_smoothing);
  planner::budgets paced = s.budget;
  paced.horizon_slots = s.slots;  // a scenario's length is known: pace the budget over it
  planner::virtual_queues queues(paced);
  rng noise(s.seed * 0x9e3779b97f4a7c15ULL + 17);
  std::optional<planner::plan> prev;
  run_result out;
  std::string first_error;
  for (int t = 0; t < s.slots; ++t) {
    const planner::cluster_state& truth_c = w.at(t);
    const auto hidden = w.failing(t);
    const planner::cluster_state view_c = est.view(truth_c, hidden);
    planner::problem view(s.model, view_c, s.cfg, s.budget);
    planner::problem truth(s.model, truth_c, s.cfg, s.budget);
    slot_record rec;
    rec.slot = t;
    rec.floor_s = truth.floor_s();
    const planner::plan* prev_p = prev ? &*prev : nullptr;
    auto decided = (*pol)->decide({view, prev_p, queues.state(), t});
    if (decided && uses_any(*decided, hidden)) {
      // The step dies part-way: the work until then and the detection are lost, then the
      // policy re-plans without the failed device and the step runs again.
      rec.failed = true;
      // The lost attempt ran on the cluster as it was when the step began: the failing
      // devices still in it.
      planner::cluster_state before_c = truth_c;
      for (auto& d : before_c.devices)
        if (std::find(hidden.begin(), hidden.end(), d.id) != hidden.end()) d.available = true;
      const planner::problem before(s.model, before_c, s.cfg, s.budget);
      const double lost = simulate_step(before, *decided, prev_p).time_s * noise.uniform() + s.detect_s;
      const planner::cluster_state known_c = est.view(truth_c, {});
      const planner::problem known(s.model, known_c, s.cfg, s.budget);
      decided = (*pol)->decide({known, prev_p, queues.state(), t});
      rec.batch_time_s += lost;
    }
    if (!decided) {
      if (first_error.empty()) first_error = "slot " + std::to_string(t) + ": " + decided.err().message;
      rec.cost_queue = queues.state().cost;
      out.slots.push_back(rec);
      if (on_slot) on_slot(t);
      continue;
    }
    const planner::plan& pl = *decided;
    if (auto pred = planner::evaluate(view, pl, prev_p, {})) rec.predicted_s = pred->batch_time_s;
    const step_outcome step = simulate_step(truth, pl, prev_p);
    rec.ok = true;
    rec.batch_time_s += step.time_s;
    rec.predicted_s += rec.batch_time_s - step.time_s;  // a failure's loss is not the planner's error
    double price = 0;
    std::vector<std::pair<int, double>> energy;
    for (const auto& st : step.stages) {
      const auto& d = truth_c.devices[truth.links.index_of(st.device)];
      price += d.price_per_s;
      energy.emplace_back(st.device, d.power_w * st.compute_s);
      rec.energy_j += d.power_w * st.compute_s;
      ++rec.devices_used;
    }
    rec.cost = price * rec.batch_time_s;
    rec.bytes_migrated = step.bytes_migrated;
    rec.groups = static_cast<int>(pl.groups.size());
    rec.replanned = prev && !same_structure(*prev, pl);
    queues.update(rec.cost, energy);
    rec.cost_queue = queues.state().cost;
    est.observe(step, truth, s.measurement_noise, noise);
    prev = pl;
    out.slots.push_back(rec);
    if (on_slot) on_slot(t);
  }
  out.sum = summarise(policy_name, out.slots, s.budget.has_cost() ? s.budget.cost_per_slot : -1);
  out.sum.error = first_error;
  return out;
}

}  // namespace dynapar::sim
