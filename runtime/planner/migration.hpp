// The order in which a plan diff is carried out, as pure code (issue 72): what a device gives
// away goes before what it takes, so that no device ever holds more than its old layers or its
// new ones. Layers no move reads are dropped first; moves go in waves, a move being ready when
// its target gives nothing still to be sent; between waves the layers whose moves are done are
// dropped; a cycle (devices trading layers, each with room for one) leaves no move ready, and
// one of its layers is staged off the devices with its optimizer state, dropped by its giver,
// and placed on its targets once the rest have moved. The driver carries each step out
// (actors/driver_plans.cpp); the tests check the order on synthetic diffs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "planner/plan.hpp"

namespace dynapar::planner {

struct migration_step {
  enum class kind {
    drop,          // `drops` (device, layer), every answer awaited
    move,          // a wave of `moves`
    stage,         // layer `layer` staged from device `from`, for `moves` (its targets)
    place_staged,  // every staged layer to its moves' targets
    drop_last,     // `drops` left at the end: a device that does not answer is found lost by the step
  } what = kind::drop;
  std::vector<std::pair<int, int>> drops;
  std::vector<layer_move> moves;
  int from = -1, layer = -1;
};

class migration_order {
 public:
  explicit migration_order(const plan_diff& d);
  // The next step; false once the diff is carried out (or the order is stuck: error()).
  bool next(migration_step& out);
  // Every drop asked before the end (not drop_last): if the diff fails half way, the devices
  // that dropped no longer match the plan in force.
  const std::vector<std::pair<int, int>>& dropped() const { return dropped_; }
  const std::string& error() const { return error_; }

 private:
  bool reads(const std::vector<layer_move>& moves, const std::pair<int, int>& d) const;
  migration_step drop(std::vector<std::pair<int, int>> d);

  std::vector<std::pair<int, int>> early_, late_;  // drops no move reads; drops a waiting move reads
  std::vector<layer_move> waiting_;
  std::vector<std::pair<int, int>> dropped_;
  std::vector<migration_step> queued_;             // steps decided together, in order
  bool staged_ = false, started_ = false, done_ = false;
  std::string error_;
};

}  // namespace dynapar::planner
