// Virtual queues of drift-plus-penalty (docs/MODEL.md). Owned by whoever runs the
// slots (the controller actor, the simulator); fed with what a slot really cost. Pure.
#pragma once

#include <utility>
#include <vector>

#include "planner/problem.hpp"

namespace dynapar::planner {

class virtual_queues {
 public:
  explicit virtual_queues(budgets b) : budget_(std::move(b)) {}
  // Q(t+1) = max(Q(t) + C(t) / C_bar - 1, 0); Z_d(t+1) = max(Z_d(t) + E_d(t) / E_bar_d - 1, 0):
  // The formulation's queues divided by their budgets, so that V needs no units (docs/MODEL.md).
  // `energy` lists (device id, joules) of the slot; devices absent spent nothing.
  void update(double slot_cost, const std::vector<std::pair<int, double>>& energy);
  queue_state state() const;
  double cost_backlog() const { return q_; }
  const budgets& budget() const { return budget_; }
  // Restores a backlog (checkpoints).
  void restore(const queue_state& s);
  // The per-slot cost budget of the next slot: C_bar, or with a known horizon what is left of
  // the run's budget over the slots left (at least a tenth of C_bar).
  double paced_cost_budget() const;
  // Likewise for the k-th energy budget (budgets::energy_per_slot order).
  double paced_energy_budget(std::size_t k) const;

 private:
  budgets budget_;
  double q_ = 0;
  double spent_ = 0;
  int slots_ = 0;
  std::vector<double> z_;        // parallel to budget_.energy_per_slot
  std::vector<double> e_spent_;  // likewise: joules so far
};

}  // namespace dynapar::planner
