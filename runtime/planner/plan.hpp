// A plan: the decision of one slot (FORMULATION section 2), by device id. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::planner {

enum class schedule_kind { gpipe, one_f_one_b };
const char* to_string(schedule_kind s);
result<schedule_kind> parse_schedule(const std::string& s);

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

// Structural checks, each failure naming the field: every group non-empty with increasing
// splits covering [0, num_layers], no device twice, shares >= 1 summing to batch, micro-batch
// >= 1, and (if known_ids is non-empty) every device id known.
status validate(const plan& p, int num_layers, int batch, const std::vector<int>& known_ids = {});

// Human-readable one-liner: "g0[3>1>2 | 0,4,9,12] b=96 u=8; g1[...]".
std::string describe(const plan& p);

}  // namespace dynapar::planner
