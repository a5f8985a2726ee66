#include "planner/evaluate.hpp"

#include <algorithm>

#include "planner/time_model.hpp"

namespace dynapar::planner {

score_weights weights(const problem& p, const queue_state& q) {
  score_weights w;
  const double floor = p.floor_s();
  w.time = p.cfg.v / (floor > 0 && floor < unlimited ? floor : 1.0);
  w.cost = p.budget.has_cost() ? q.cost / (q.cost_budget > 0 ? q.cost_budget : p.budget.cost_per_slot) : 0.0;
  w.energy.assign(p.cluster.devices.size(), 0.0);
  for (const auto& [id, z] : q.energy) {
    const int i = p.links.index_of(id);
    if (i < 0) continue;
    double bar = 0;  // the paced budget when the queues give one, else the job's
    for (const auto& b : p.budget.energy_per_slot)
      if (b.device_id == id) bar = b.joules_per_slot;
    for (const auto& [bid, paced] : q.energy_budget)
      if (bid == id && paced > 0) bar = paced;
    if (bar > 0) w.energy[i] = z / bar;
  }
  // A slot's allowance: what is left of the whole run's budget over the slots left, with
  // budgets::slot_slack and budgets::payback (docs/MODEL.md, "Every slot within its share").
  // A run already over it has nothing left to guard: the queues alone steer it (forcing the
  // cheapest plan then would buy back little at any cost in time).
  const int H = p.budget.horizon_slots;
  if (H > 0 && q.slots < H) {
    const double slots_left = H - q.slots;
    const auto allowance = [&](double per_slot, double spent) {
      const double left = std::max(0.0, per_slot * H - spent);
      return std::min(left, std::max((1 + p.budget.slot_slack) * left / slots_left, p.budget.payback * left));
    };
    bool any = false;
    if (p.budget.has_cost()) {
      w.cost_allowance = allowance(p.budget.cost_per_slot, q.spent) / std::clamp(q.time_ratio, 0.5, 4.0);
      any = w.cost_allowance > 0;
    }
    if (!p.budget.energy_per_slot.empty()) w.energy_allowance.assign(p.cluster.devices.size(), 0.0);
    for (const auto& b : p.budget.energy_per_slot) {
      double spent = 0;
      for (const auto& [id, j] : q.energy_spent)
        if (id == b.device_id) spent = j;
      if (const int i = p.links.index_of(b.device_id); i >= 0) {
        w.energy_allowance[i] = allowance(b.joules_per_slot, spent);
        any = any || w.energy_allowance[i] > 0;
      }
    }
    // Above any in-budget score: the time term of a plan 1000 times the floor, the queues'
    // terms at 1000 budgets. None when nothing is left to guard.
    if (any) {
      w.guard = 1e3 * (p.cfg.v + 1 + q.cost);
      for (const auto& [id, z] : q.energy) w.guard += 1e3 * z;
    }
  }
  return w;
}

double score_weights::over_allowance(double spend, const std::vector<double>& energy_j) const {
  if (guard == 0) return 0;
  double over = 0;
  if (cost_allowance > 0 && spend > cost_allowance) over += spend / cost_allowance - 1;
  for (std::size_t i = 0; i < energy_allowance.size() && i < energy_j.size(); ++i)
    if (energy_allowance[i] > 0 && energy_j[i] > energy_allowance[i]) over += energy_j[i] / energy_allowance[i] - 1;
  return over > 0 ? guard * (1 + over) : 0;
}

result<plan_report> evaluate(const problem& p, const plan& pl, const plan* previous, const queue_state& queues) {
  if (auto s = validate(pl, p.num_layers(), p.cfg.batch); !s) return s.err();
  plan_report r;
  std::vector<group_shape> shapes;
  for (std::size_t g = 0; g < pl.groups.size(); ++g) {
    const auto& gp = pl.groups[g];
    std::vector<int> idx;
    for (int id : gp.devices) {
      const int i = p.links.index_of(id);
      if (i < 0) return make_error("bad_plan", "plan names unknown device id " + std::to_string(id));
      if (!p.cluster.devices[i].available)
        return make_error("bad_plan", "plan uses device " + std::to_string(id) + ", which is not available");
      idx.push_back(i);
    }
    shapes.push_back(make_shape(p, idx, gp.splits, gp.micro_batch));
    const auto& s = shapes.back();
    if (!s.feasible || gp.share > s.cap)
      return make_error("infeasible", "group " + std::to_string(g) + " does not fit its devices' memory with share " +
                                          std::to_string(gp.share) + " and micro-batch " + std::to_string(gp.micro_batch));
  }
  const holdings held(p, previous);
  std::vector<const group_shape*> active;
  std::vector<double> shares, times;
  for (std::size_t g = 0; g < shapes.size(); ++g) {
    const auto& s = shapes[g];
    const auto& gp = pl.groups[g];
    group_report gr;
    gr.devices = gp.devices;
    gr.splits = gp.splits;
    gr.share = gp.share;
    gr.micro_batch = gp.micro_batch;
    gr.time_s = group_time(p, s, gp.share);
    gr.bottleneck_s = s.bottleneck_s;
    gr.stage_s = s.stage_s;
    gr.link_s = s.link_s;
    gr.cap = s.cap;
    const int n = s.stages();
    if (s.bottleneck < n) {
      gr.bottleneck = "stage " + std::to_string(s.bottleneck) + " (device " + std::to_string(gp.devices[s.bottleneck]) + ")";
    } else if (s.bottleneck >= 2 * n) {
      const int j = s.bottleneck - 2 * n;
      gr.bottleneck = "1F1B round trip from stage " + std::to_string(j) + " (too few micro-batches in flight to hide its links)";
    } else {
      const int j = s.bottleneck - n;
      gr.bottleneck = "link " + std::to_string(j) + "->" + std::to_string(j + 1) + " (devices " +
                      std::to_string(gp.devices[j]) + "->" + std::to_string(gp.devices[j + 1]) + ")";
    }
    r.compute_s = std::max(r.compute_s, gr.time_s);
    for (int j = 0; j < n; ++j) {
      const auto [sec, bytes] = held.bring(p, s.devices[j], s.splits[j], s.splits[j + 1]);
      r.migration_s = std::max(r.migration_s, sec);
      r.bytes_migrated += bytes;
      const double busy = stage_busy(p, s, j, gp.share);
      const auto& dev = p.cluster.devices[s.devices[j]];
      r.device_busy_s.emplace_back(dev.id, busy);
      r.device_energy_j.emplace_back(dev.id, dev.power_w * busy);
      r.energy_j += dev.power_w * busy;
      r.price_per_s += dev.price_per_s;
    }
    active.push_back(&s);
    shares.push_back(gp.share);
    times.push_back(gr.time_s);
    r.groups.push_back(std::move(gr));
  }
  r.sync_s = exposed_sync(p, active, shares, times);
  r.update_s = update_time(p, active);
  r.batch_time_s = r.compute_s + r.sync_s + r.update_s + r.migration_s;
  r.cost = r.price_per_s * r.batch_time_s;
  r.floor_s = p.floor_s();
  r.efficiency = r.batch_time_s > 0 ? r.floor_s / r.batch_time_s : 0;
  const score_weights w = weights(p, queues);
  // Scored by the slot's mean step: the migration once over the slot's steps.
  const double slot_step_s = r.batch_time_s - r.migration_s + p.cfg.per_step(r.migration_s);
  const double slot_cost = r.price_per_s * slot_step_s;
  r.time_term = w.time * slot_step_s;
  r.cost_term = w.cost * slot_cost;
  std::vector<double> energy_j(w.energy_allowance.empty() ? 0 : p.cluster.devices.size(), 0.0);
  for (const auto& [id, e] : r.device_energy_j) {
    const int i = p.links.index_of(id);
    r.energy_term += w.energy[i] * e;
    if (!energy_j.empty()) energy_j[i] += e;
  }
  r.guard_term = w.over_allowance(slot_cost, energy_j);
  r.score = r.time_term + r.cost_term + r.energy_term + r.guard_term;
  return r;
}

}  // namespace dynapar::planner
