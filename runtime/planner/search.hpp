// Tentative searching (docs/MODEL.md): device selection, grouping and pipeline order,
// scored by partitioning + linear solving + sync + migration + queue terms. Pure; one
// structure_evaluator per decision (it caches group shapes for that slot's estimates).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "planner/evaluate.hpp"
#include "planner/time_model.hpp"

namespace dynapar::planner {

// Groups of device indices, each in pipeline order.
using structure = std::vector<std::vector<int>>;

struct structure_score {
  double score = std::numeric_limits<double>::infinity();
  double batch_time_s = std::numeric_limits<double>::infinity();
  double cost = 0;
  bool feasible() const { return score < std::numeric_limits<double>::infinity(); }
};

class structure_evaluator {
 public:
  structure_evaluator(const problem& p, const plan* previous, queue_state queues);
  // Continuous shares (water-filling on the affine model); counts one evaluation.
  structure_score score(const structure& s);
  // Integer shares minimising the makespan exactly; empty groups dropped. Error if infeasible.
  result<plan> materialize(const structure& s, std::int64_t slot);
  // The exact score of a complete plan (evaluate()), infinite when it does not fit.
  double score_exact(const plan& pl) const;
  int evaluations() const { return evaluations_; }
  const problem& prob() const { return p_; }
  const plan* previous() const { return previous_; }

 private:
  struct entry {
    std::vector<group_shape> shapes;   // one per feasible micro-batch
    std::vector<double> mig_s;  // per shape: slowest device's migration
    double price = 0, speed_sum = 0;
  };
  const entry& lookup(const std::vector<int>& devices);
  struct choice { const group_shape* shape; double mig_s; double share; };
  bool solve(const structure& s, std::vector<choice>& out, double& finish);
  const problem& p_;
  const plan* previous_;
  holdings held_;
  queue_state queues_;
  score_weights w_;
  std::vector<double> energy_j_;  // scratch of score(): joules a step by device index (guard)
  double total_speed_ = 0;
  struct vec_hash { std::size_t operator()(const std::vector<int>& v) const; };
  std::unordered_map<std::vector<int>, entry, vec_hash> cache_;
  int evaluations_ = 0;
};

// Plans built from locality, best first (at most `keep`): for each group size n, devices
// ordered by (rack, node, speed) chunked into groups of n; power-balanced groups of n (a
// snake over speeds); and the n fastest devices as one pipeline.
std::vector<structure> cold_starts(structure_evaluator& ev, std::size_t keep);

// The previous plan's structure over the devices still available (indices).
structure warm_start(const problem& p, const plan& previous);

struct search_result {
  plan best;
  int evaluations = 0;
  int moves = 0;
};

// Best-improvement local search (remove, add, move, swap, exchange, split, merge) from the
// warm start and, when it is missing or infeasible or the budget is a full one, from the best
// cold starts, until no move improves or `budget` evaluations are spent (neighbourhoods larger
// than what is left are sampled). The few best structures seen are priced exactly (integer
// shares) and the best returned, unless it beats the warm plan by less than `replan_margin`:
// then the warm plan (the better of its devices re-partitioned and the previous layout
// re-shared, layout_keeping()).
result<search_result> tentative_search(structure_evaluator& ev, structure start, std::int64_t slot, int budget);

}  // namespace dynapar::planner
