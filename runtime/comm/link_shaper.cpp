#include "comm/link_shaper.hpp"

#include <algorithm>

namespace dynapar::comm {

double transfer_s(const link_spec& l, double bytes) { return l.lat + (l.bw > 0 ? bytes / l.bw : 0.0); }

double link_shaper::offer(const link_spec& l, double now_s, double bytes) {
  const double t = transfer_s(l, bytes);
  free_at_ = std::max(free_at_, now_s) + t;
  busy_s_ += t;
  bytes_ += bytes;
  ++transfers_;
  return free_at_;
}

void link_shaper::reset_counters() {
  busy_s_ = bytes_ = 0;
  transfers_ = 0;
}

}  // namespace dynapar::comm
