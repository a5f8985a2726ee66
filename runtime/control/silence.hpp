// When a silent node counts as lost (docs/RELIABILITY.md, "Detection"): from the gaps between
// its messages, not a fixed timeout. A fixed 2 s is too slow where nodes talk every 100 ms
// (each crash costs the whole timeout) and too quick on a loaded machine, where a node that
// is only starved of CPU misses it. Pure: times are seconds on any clock the caller keeps.
#pragma once

#include <algorithm>
#include <deque>

namespace dynapar::control {

struct silence_config {
  double floor_s = 0.5;    // never less: scheduling hiccups of a healthy machine
  double cap_s = 10;       // never more: a node stuck this long is lost however it behaved
  double initial_s = 6;    // until `warmup` gaps are known: a joining node builds its model,
                           // and a loaded machine can starve it for seconds
  double factor = 4;       // allowed: this many times the largest recent gap
  int window = 64;         // recent gaps remembered
  int warmup = 8;
};

class silence_detector {
 public:
  explicit silence_detector(silence_config c = {}, double now_s = 0) : c_(c), last_s_(now_s) {}
  // A message from the node at time now_s.
  void heard(double now_s);
  // How long the node may stay silent now.
  double allowed_s() const;
  bool lost(double now_s) const { return now_s > busy_until_s_ && now_s - last_s_ > allowed_s(); }
  // The node was asked for something large (a layer copy): its heartbeats queue behind that
  // answer on the one connection, so it is not lost before `until_s`, however long it is silent.
  void busy_until(double until_s) { busy_until_s_ = std::max(busy_until_s_, until_s); }
  double last_s() const { return last_s_; }

 private:
  silence_config c_;
  double last_s_;
  double busy_until_s_ = 0;
  std::deque<double> gaps_;
};

}  // namespace dynapar::control
