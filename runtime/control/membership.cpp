#include "control/membership.hpp"

namespace dynapar::control {

void membership::join(int id) { devices_[id].at = where::joined; }

void membership::depart(int id) {
  if (joined(id)) devices_[id].at = where::leaving;
}

void membership::kill_sent(int id) { devices_[id].failing = true; }

void membership::stopped(int id) { devices_[id].dead = true; }

void membership::retire(int id) {
  const auto it = devices_.find(id);
  if (it == devices_.end() || it->second.at != where::leaving) return;
  it->second.at = where::out;
  if (!it->second.failing && !it->second.dead) devices_.erase(it);
}

void membership::forget(int id) { devices_.erase(id); }

std::set<int> membership::dead_ids() const {
  std::set<int> out;
  for (const auto& [id, r] : devices_)
    if (r.dead) out.insert(id);
  return out;
}

bool membership::member_died() const {
  for (const auto& [id, r] : devices_)
    if (r.dead && r.at != where::out) return true;
  return false;
}

std::vector<int> membership::ids(where w) const {
  std::vector<int> out;
  for (const auto& [id, r] : devices_)
    if (r.at == w) out.push_back(id);
  return out;
}

}  // namespace dynapar::control
