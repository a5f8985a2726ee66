#include "control/silence.hpp"

#include <algorithm>

namespace dynapar::control {

void silence_detector::heard(double now_s) {
  if (now_s > last_s_) gaps_.push_back(now_s - last_s_);
  last_s_ = std::max(last_s_, now_s);
  while (static_cast<int>(gaps_.size()) > std::max(1, c_.window)) gaps_.pop_front();
}

double silence_detector::allowed_s() const {
  if (static_cast<int>(gaps_.size()) < c_.warmup) return std::clamp(c_.initial_s, c_.floor_s, c_.cap_s);
  return std::clamp(c_.factor * *std::max_element(gaps_.begin(), gaps_.end()), c_.floor_s, c_.cap_s);
}

}  // namespace dynapar::control
