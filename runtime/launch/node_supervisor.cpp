#include "launch/node_supervisor.hpp"

#include <algorithm>

namespace dynapar::launch {

node_supervisor::node_supervisor(process_table& os, const supervisor_config& cfg, const std::set<int>& job_devices)
    : os_(os), cfg_(cfg) {
  if (cfg.nodes < 1) return;
  devices_.resize(static_cast<std::size_t>(cfg.nodes));
  if (!cfg.described) {
    std::size_t k = 0;
    for (int id : job_devices)
      if (cfg.only.empty() || std::count(cfg.only.begin(), cfg.only.end(), id)) devices_[k++ % devices_.size()].push_back(id);
    devices_.erase(std::remove_if(devices_.begin(), devices_.end(), [](const auto& v) { return v.empty(); }), devices_.end());
  }
  for (std::size_t n = 0; n < devices_.size(); ++n) nodes_.push_back({"node-" + std::to_string(n), -1, -1});
}

void node_supervisor::start() {
  for (std::size_t n = 0; n < nodes_.size(); ++n) nodes_[n].handle = os_.start(nodes_[n].name, devices_[n]);
}

std::vector<std::string> node_supervisor::poll(double now_s) {
  std::vector<std::string> crashed;
  for (auto& n : nodes_) {
    if (n.handle < 0) continue;
    const auto st = os_.poll(n.handle);
    if (st == process_table::state::running) continue;
    if (st == process_table::state::failed) {
      crashed.push_back("node process " + std::to_string(n.handle) + " ('" + n.name + "') failed");
      n.crashed_at = now_s;
    }
    n.handle = -1;
  }
  return crashed;
}

std::vector<std::string> node_supervisor::respawn(double now_s, const std::function<bool(int)>& held) {
  std::vector<std::string> started;
  if (cfg_.respawn_s < 0) return started;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto& n = nodes_[i];
    if (n.crashed_at < 0 || now_s - n.crashed_at < cfg_.respawn_s) continue;
    if (std::any_of(devices_[i].begin(), devices_[i].end(), held)) continue;
    n.name = "node-" + std::to_string(i) + "-r" + std::to_string(++restarts_);
    n.handle = os_.start(n.name, devices_[i]);
    n.crashed_at = n.handle < 0 ? now_s : -1;  // could not start: try again later
    if (n.handle >= 0) started.push_back(n.name);
  }
  return started;
}

bool node_supervisor::all_ended() const {
  return std::none_of(nodes_.begin(), nodes_.end(), [](const node& n) { return n.handle >= 0; });
}

void node_supervisor::kill_rest() {
  for (auto& n : nodes_)
    if (n.handle >= 0) {
      os_.kill(n.handle);
      n.handle = -1;
    }
}

}  // namespace dynapar::launch
