#include "control/confirmations.hpp"

namespace dynapar::control {

void apply_confirmations::begin(std::int64_t tag) {
  tag_ = tag;
  got_.clear();
}

bool apply_confirmations::confirm(int device, std::int64_t tag, int layer) {
  return tag == tag_ && got_[layer].insert(device).second;
}

std::set<int> apply_confirmations::missing(const std::map<int, std::vector<int>>& holders, const std::function<bool(int)>& in_run) const {
  std::set<int> out;
  for (const auto& [l, ids] : holders) {
    const auto it = got_.find(l);
    for (int id : ids)
      if (in_run(id) && (it == got_.end() || !it->second.count(id))) out.insert(id);
  }
  return out;
}

}  // namespace dynapar::control
