#include "planner/lyapunov.hpp"

#include <algorithm>

namespace dynapar::planner {

double virtual_queues::paced_cost_budget() const {
  const double c = budget_.cost_per_slot;
  const int h = budget_.horizon_slots;
  if (!budget_.has_cost() || h <= 0 || slots_ >= h) return c;
  return std::max(0.1 * c, (c * h - spent_) / (h - slots_));
}

void virtual_queues::update(double slot_cost, const std::vector<std::pair<int, double>>& energy) {
  // In budget units: Q counts how many slots' worth of budget have been overspent, against
  // the paced budget when the horizon is known.
  if (budget_.has_cost()) q_ = std::max(q_ + slot_cost / paced_cost_budget() - 1.0, 0.0);
  spent_ += slot_cost;
  ++slots_;
  z_.resize(budget_.energy_per_slot.size(), 0.0);
  for (std::size_t k = 0; k < budget_.energy_per_slot.size(); ++k) {
    const auto& e = budget_.energy_per_slot[k];
    double spent = 0;
    for (const auto& [id, j] : energy)
      if (id == e.device_id) spent += j;
    z_[k] = std::max(z_[k] + spent / e.joules_per_slot - 1.0, 0.0);
  }
}

queue_state virtual_queues::state() const {
  queue_state s;
  s.cost = q_;
  s.cost_budget = budget_.has_cost() ? paced_cost_budget() : 0;
  s.spent = spent_;
  s.slots = slots_;
  for (std::size_t k = 0; k < z_.size(); ++k) s.energy.emplace_back(budget_.energy_per_slot[k].device_id, z_[k]);
  return s;
}

void virtual_queues::restore(const queue_state& s) {
  q_ = s.cost;
  spent_ = s.spent;
  slots_ = s.slots;
  z_.assign(budget_.energy_per_slot.size(), 0.0);
  for (std::size_t k = 0; k < z_.size(); ++k)
    for (const auto& [id, z] : s.energy)
      if (id == budget_.energy_per_slot[k].device_id) z_[k] = z;
}

}  // namespace dynapar::planner
