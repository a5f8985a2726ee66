#include "planner/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace dynapar::planner {
namespace {
std::uint64_t pair_key(int i, int j) {
  if (i > j) std::swap(i, j);
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(i)) << 32) | static_cast<std::uint32_t>(j);
}
bool positive(double v) { return v > 0 && !std::isnan(v); }
}  // namespace

status validate(const cluster_state& c) {
  if (c.devices.empty()) return make_error("bad_cluster", "cluster has no devices");
  std::unordered_set<int> ids;
  for (std::size_t i = 0; i < c.devices.size(); ++i) {
    const auto& d = c.devices[i];
    const std::string where = "devices[" + std::to_string(i) + "]";
    if (!ids.insert(d.id).second) return make_error("bad_cluster", where + ".id " + std::to_string(d.id) + " is repeated");
    if (!positive(d.speed) || std::isinf(d.speed)) return make_error("bad_cluster", where + ".speed must be > 0 and finite");
    if (!positive(d.memory_bytes)) return make_error("bad_cluster", where + ".memory must be > 0");
    if (!(d.price_per_s >= 0) || std::isinf(d.price_per_s)) return make_error("bad_cluster", where + ".price must be >= 0");
    if (!(d.power_w >= 0) || std::isinf(d.power_w)) return make_error("bad_cluster", where + ".power must be >= 0");
    if (!positive(d.nic_bw)) return make_error("bad_cluster", where + ".nic bandwidth must be > 0");
  }
  for (const auto* t : {&c.tiers.same_node, &c.tiers.same_rack, &c.tiers.cross_rack})
    if (!positive(t->bw) || !(t->lat >= 0)) return make_error("bad_cluster", "link tiers need bandwidth > 0 and latency >= 0");
  for (std::size_t i = 0; i < c.overrides.size(); ++i) {
    const auto& o = c.overrides[i];
    const std::string where = "link_overrides[" + std::to_string(i) + "]";
    if (!ids.count(o.a) || !ids.count(o.b)) return make_error("bad_cluster", where + " names an unknown device id");
    if (!positive(o.bw) || !(o.lat >= 0)) return make_error("bad_cluster", where + " needs bandwidth > 0 and latency >= 0");
  }
  if (!positive(c.checkpoint_bw)) return make_error("bad_cluster", "checkpoint bandwidth must be > 0");
  return ok_status();
}

link_table::link_table(const cluster_state& cluster) : cluster_(&cluster) {
  const auto& devs = cluster.devices;
  node_key_.resize(devs.size());
  for (std::size_t i = 0; i < devs.size(); ++i) {
    node_key_[i] = devs[i].node >= 0 ? devs[i].node : -1 - static_cast<long>(i);
    index_of_[devs[i].id] = static_cast<int>(i);
  }
  for (const auto& o : cluster.overrides) {
    auto a = index_of_.find(o.a), b = index_of_.find(o.b);
    if (a != index_of_.end() && b != index_of_.end()) overrides_[pair_key(a->second, b->second)] = {o.bw, o.lat};
  }
}

int link_table::index_of(int id) const {
  auto it = index_of_.find(id);
  return it == index_of_.end() ? -1 : it->second;
}

const link_tier& link_table::tier(int i, int j) const {
  const auto& devs = cluster_->devices;
  if (node_key_[i] == node_key_[j]) return cluster_->tiers.same_node;
  if (devs[i].rack == devs[j].rack) return cluster_->tiers.same_rack;
  return cluster_->tiers.cross_rack;
}

double link_table::bw(int i, int j) const {
  if (i == j) return unlimited;
  double b;
  if (!overrides_.empty()) {
    auto it = overrides_.find(pair_key(i, j));
    b = it != overrides_.end() ? it->second.bw : tier(i, j).bw;
  } else {
    b = tier(i, j).bw;
  }
  const auto& devs = cluster_->devices;
  return std::min({b, devs[i].nic_bw, devs[j].nic_bw});
}

double link_table::lat(int i, int j) const {
  if (i == j) return 0;
  if (!overrides_.empty()) {
    auto it = overrides_.find(pair_key(i, j));
    if (it != overrides_.end()) return it->second.lat;
  }
  return tier(i, j).lat;
}

}  // namespace dynapar::planner
