#include "control/confirmations.hpp"

#include <utility>

namespace dynapar::control {

void apply_confirmations::begin(std::int64_t tag, std::map<int, std::vector<int>> buckets) {
  tag_ = tag;
  buckets_ = std::move(buckets);
  got_.clear();
}

bool apply_confirmations::confirm(int device, std::int64_t tag, int layer) {
  if (tag != tag_) return false;
  const auto it = buckets_.find(layer);
  if (it == buckets_.end()) return got_[layer].insert(device).second;
  bool fresh = false;
  for (int l : it->second) fresh = got_[l].insert(device).second || fresh;
  return fresh;
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
