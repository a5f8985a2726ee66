// One direction of an emulated link: transfers go one after another (FIFO), each occupying
// the link for latency + bytes / bandwidth, as the planner's time model and the simulator's
// DES price a link. A device actor delays each message's delivery by what this returns, so
// one process plays a cluster with slow links without using any CPU to do it. Pure: the
// caller passes the time.
#pragma once

#include <cstddef>
#include <limits>

namespace dynapar::comm {

struct link_spec {
  double bw = std::numeric_limits<double>::infinity();  // bytes/s
  double lat = 0;                                        // seconds per transfer
};

// Seconds one transfer of `bytes` occupies the link.
double transfer_s(const link_spec& l, double bytes);

class link_shaper {
 public:
  // A transfer offered at `now_s` (any fixed epoch): returns the time it has arrived, after
  // the transfers offered before it.
  double offer(const link_spec& l, double now_s, double bytes);
  // What the link did since the last reset: a NIC's counters.
  double busy_s() const { return busy_s_; }
  double bytes() const { return bytes_; }
  int transfers() const { return transfers_; }
  void reset_counters();

 private:
  double free_at_ = -std::numeric_limits<double>::infinity();
  double busy_s_ = 0, bytes_ = 0;
  int transfers_ = 0;
};

}  // namespace dynapar::comm
