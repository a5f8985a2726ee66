// A plan: the decision of one slot (docs/MODEL.md), by device id. Plain data.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::planner {

// deep_1f1b ("1f1b-deep"): 1F1B with twice the warm-up, so that a round trip through slow
// links has more micro-batches in flight to hide it (docs/MODEL.md), at the price of memory.
enum class schedule_kind { gpipe, one_f_one_b, deep_1f1b };
const char* to_string(schedule_kind s);
result<schedule_kind> parse_schedule(const std::string& s);
// Forwards stage j of n runs before its first backward under a 1F1B kind: n - j - 1, twice
// that for deep_1f1b (it then holds one more micro-batch's activations than this).
int warm_up(schedule_kind s, int stages, int stage);

struct group_plan {
  std::vector<int> devices;  // pipeline order, device ids
  std::vector<int> splits;   // n + 1 cut points: 0 = c_0 < c_1 < ... < c_n = L
  int share = 0;             // samples of the global batch
  int micro_batch = 1;
};

struct plan {
  std::int64_t slot = 0;
  schedule_kind schedule = schedule_kind::one_f_one_b;
  std::vector<group_plan> groups;
  bool operator==(const plan& o) const;
};

bool operator==(const group_plan& a, const group_plan& b);

// The micro-batches `samples` samples make in micro-batches of `micro_batch` (the last one
// short; a size below 1 counts as 1): the one rule the step's layout, the controller's
// measurement and the simulator count by.
int micro_batches(int samples, int micro_batch);

// Structural checks, each failure naming the field: every group non-empty with increasing
// splits covering [0, num_layers], no device twice, shares >= 1 summing to batch, micro-batch
// >= 1, and (if known_ids is non-empty) every device id known.
status validate(const plan& p, int num_layers, int batch, const std::vector<int>& known_ids = {});

// Human-readable one-liner: "g0[3>1>2 | 0,4,9,12] b=96 u=8; g1[...]".
std::string describe(const plan& p);
// The short form for a status line: each group's pipeline and share, "[0]:56 [1>3>2]:40".
std::string brief(const plan& p);

// A plan change as the devices see it (the repartition the runtime applies between steps):
// every (device, layer) placement of `to` that its device did not hold under `from` is a
// move from one holder under `from` (all replicas are identical; -1: no holder, a fresh
// layer); every placement of `from` that `to` lacks is dropped.
struct layer_move {
  int layer = 0;
  int to = 0;
  int from = -1;
};

struct plan_diff {
  std::vector<layer_move> moves;
  std::vector<std::pair<int, int>> drops;  // (device, layer)
  std::vector<int> joined, left;           // devices only `to` uses / only `from` uses
  bool empty() const { return moves.empty() && drops.empty(); }
};

// `source_cost(from, to)` ranks the holders a layer may come from (lower first, e.g. the
// transfer time of the link); without it the first holder in plan order is taken. Devices in
// `wiped` hold nothing any more although `from` places layers on them (lost since `from` was
// applied, perhaps back as fresh devices under the same ids): they are no source and keep
// nothing, and a layer whose every holder was wiped is a move with no source (-1).
plan_diff diff(const plan* from, const plan& to, const std::function<double(int, int)>& source_cost = {},
               const std::set<int>& wiped = {});

}  // namespace dynapar::planner
