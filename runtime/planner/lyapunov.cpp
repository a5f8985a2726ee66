#include "planner/lyapunov.hpp"

#include <algorithm>

namespace dynapar::planner {

namespace {
// What is left of a run's budget over the slots left, at least a tenth of the per-slot one.
double paced(double per_slot, int horizon, int slots, double spent) {
  if (horizon <= 0 || slots >= horizon) return per_slot;
  return std::max(0.1 * per_slot, (per_slot * horizon - spent) / (horizon - slots));
}
}  // namespace

double virtual_queues::paced_cost_budget() const {
  if (!budget_.has_cost()) return budget_.cost_per_slot;
  return paced(budget_.cost_per_slot, budget_.horizon_slots, slots_, spent_);
}

double virtual_queues::paced_energy_budget(std::size_t k) const {
  const double spent = k < e_spent_.size() ? e_spent_[k] : 0.0;
  return paced(budget_.energy_per_slot.at(k).joules_per_slot, budget_.horizon_slots, slots_, spent);
}

void virtual_queues::update(double slot_cost, const std::vector<std::pair<int, double>>& energy) {
  // In budget units: Q counts how many slots' worth of budget have been overspent, against
  // the paced budget when the horizon is known.
  if (budget_.has_cost()) q_ = std::max(q_ + slot_cost / paced_cost_budget() - 1.0, 0.0);
  z_.resize(budget_.energy_per_slot.size(), 0.0);
  e_spent_.resize(budget_.energy_per_slot.size(), 0.0);
  for (std::size_t k = 0; k < budget_.energy_per_slot.size(); ++k) {
    double spent = 0;
    for (const auto& [id, j] : energy)
      if (id == budget_.energy_per_slot[k].device_id) spent += j;
    z_[k] = std::max(z_[k] + spent / paced_energy_budget(k) - 1.0, 0.0);  // before this slot counts
    e_spent_[k] += spent;
  }
  spent_ += slot_cost;
  ++slots_;
}

queue_state virtual_queues::state() const {
  queue_state s;
  s.cost = q_;
  s.cost_budget = budget_.has_cost() ? paced_cost_budget() : 0;
  s.spent = spent_;
  s.slots = slots_;
  for (std::size_t k = 0; k < budget_.energy_per_slot.size(); ++k) {
    const int id = budget_.energy_per_slot[k].device_id;
    s.energy.emplace_back(id, k < z_.size() ? z_[k] : 0.0);
    s.energy_budget.emplace_back(id, paced_energy_budget(k));
    s.energy_spent.emplace_back(id, k < e_spent_.size() ? e_spent_[k] : 0.0);
  }
  return s;
}

void virtual_queues::restore(const queue_state& s) {
  q_ = s.cost;
  spent_ = s.spent;
  slots_ = s.slots;
  z_.assign(budget_.energy_per_slot.size(), 0.0);
  e_spent_.assign(budget_.energy_per_slot.size(), 0.0);
  for (std::size_t k = 0; k < z_.size(); ++k) {
    for (const auto& [id, z] : s.energy)
      if (id == budget_.energy_per_slot[k].device_id) z_[k] = z;
    for (const auto& [id, j] : s.energy_spent)
      if (id == budget_.energy_per_slot[k].device_id) e_spent_[k] = j;
  }
}

}  // namespace dynapar::planner
