// The controller's hub (hub_state.hpp): membership. Nodes join and leave, go silent and are
// lost, devices are retired; after each change every node hears the new peer list, so that
// data goes node to node (docs/DISTRIBUTED.md, "Data plane").
#include <algorithm>
#include <chrono>

#include "actors/remote/hub_state.hpp"

namespace dynapar::actors::remote {

using clock = std::chrono::steady_clock;

void remote_devices::impl::retired(int id, std::uint64_t gen) {
  std::string route;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = devices.find(id);
    if (it == devices.end() || it->second.gen != gen) return;
    // A lost node is not told: should it come back, it is asked to join again instead.
    if (!it->second.lost) route = it->second.route;
    devices.erase(it);
  }
  membership_changed = true;
  if (route.empty()) return;
  post(route, remote::call_to(id, wire::ops::retire{}));
}

void remote_devices::impl::broadcast_peers() {
  wire::peers_msg m;
  std::vector<std::string> routes;
  {
    std::lock_guard<std::mutex> lock(mu);
    m.generation = ++peers_generation;
    for (const auto& [route, heard] : nodes) {
      routes.push_back(route);
      auto d = data_sockets.find(route);
      if (d == data_sockets.end() || d->second.endpoint.empty()) continue;
      wire::peer_entry e{route, d->second.endpoint, d->second.public_key, {}};
      for (const auto& [id, x] : devices)
        if (x.route == route && !x.lost) e.devices.push_back(id);
      m.peers.push_back(std::move(e));
    }
  }
  for (const auto& r : routes) reply(r, m);
}

void remote_devices::impl::on_join(const std::string& route, const std::string& peer, const wire::join_msg& m) {
  wire::welcome_msg w;
  std::vector<int> ids;
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!nodes.count(route) && nodes.size() >= cfg.max_routes) problem = "too many nodes (" + std::to_string(nodes.size()) + ")";
    const auto hosted = [&](int id) { return devices.count(id) && !devices.at(id).lost; };
    for (const auto& d : m.devices) {
      if (d.id >= 0 && !cfg.devices.count(d.id)) problem = "device " + std::to_string(d.id) + " is not in the job's cluster";
      else if (d.id >= 0 && hosted(d.id)) problem = "device " + std::to_string(d.id) + " is already hosted by another node";
      ids.push_back(d.id);
    }
    // A device the node describes (id -1) takes the lowest id of the job's that nobody hosts
    // nor is named in this join.
    auto next = cfg.devices.begin();
    for (int& id : ids) {
      if (id >= 0 || !problem.empty()) continue;
      while (next != cfg.devices.end() && (hosted(*next) || std::count(ids.begin(), ids.end(), *next))) ++next;
      if (next == cfg.devices.end()) {
        problem = "no device of the job's cluster is free for a node that describes itself (" + std::to_string(cfg.devices.size()) +
                  " in the job, all hosted)";
        break;
      }
      id = *next++;
    }
  }
  if (!problem.empty()) {
    log->warn("node '{}' refused: {}", m.node, problem);
    w.reason = problem;
    return reply(route, w);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    control::silence_config c = cfg.silence;
    if (cfg.node_timeout_s > 0) c.floor_s = c.cap_s = c.initial_s = cfg.node_timeout_s;  // fixed
    nodes.insert_or_assign(route, control::silence_detector(c, now_s()));
    // The key the node proved (ROLE:NAME from the handshake) is what its peers pin.
    std::string key;
    if (auth) key = auth->key_of(peer).value_or("");
    data_sockets[route] = data_socket{m.data_endpoint, key};
    node_data.erase(route);  // until its heartbeat proves the data set it loaded for this hosting
    // A lost node's device may join again (a replacement, or the node itself once fenced):
    // it is a new hosting; the old proxy stays lost until the driver stops it.
    // A described device's host: its node's data address, which beyond one machine is the
    // machine's own (DISTRIBUTED.md); a node without one is a host of its own.
    const auto colon = m.data_endpoint.rfind(':');
    const std::string host = m.data_endpoint.rfind("tcp://", 0) == 0 && colon > 6 ? m.data_endpoint.substr(6, colon - 6) : "node " + m.node;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      devices[ids[i]] = entry{route, remote_device_handle{}, false, false, next_gen++, std::nullopt, std::nullopt};
      if (m.devices[i].id >= 0) continue;
      devices[ids[i]].described = m.devices[i].memory_bytes;
      devices[ids[i]].host = hosts.emplace(host, static_cast<int>(hosts.size())).first->second;
    }
  }
  w.accepted = true;
  w.devices = ids;
  w.model = cfg.model;
  w.model_hash = model_hash;
  w.seed = cfg.seed;
  w.optimizer = cfg.optimizer.kind;
  w.lr = cfg.optimizer.lr;
  w.momentum = cfg.optimizer.momentum;
  w.weight_decay = cfg.optimizer.weight_decay;
  w.nesterov = cfg.optimizer.nesterov;
  w.schedule = cfg.optimizer.schedule;
  w.label_smoothing = cfg.optimizer.label_smoothing;
  w.bf16 = cfg.optimizer.bf16;
  if (cfg.data_hash != 0) {
    w.data = data::encode(cfg.data);
    w.data_samples = cfg.data.synthetic_samples;
    w.data_hash = cfg.data_hash;
  }
  log->info("node '{}' joined with {} device(s){}", m.node, ids.size(), peer.empty() ? "" : ", key " + peer);
  reply(route, w);
  broadcast_peers();
}

void remote_devices::impl::on_leave(const std::string& route, const wire::leave_msg& m, std::optional<comm::key_role> role) {
  wire::welcome_msg w;
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<int> ids = m.devices;
    if (ids.empty())
      for (const auto& [id, e] : devices)
        if (e.route == route) ids.push_back(id);
    // A node key or a joined node retires only its own devices; an operator, or (without
    // keys, where nobody is authenticated) a client that hosts nothing, may name any.
    const bool own_only = role != comm::key_role::operator_ && (role == comm::key_role::node || nodes.count(route) > 0);
    for (int id : ids)
      if (!devices.count(id)) problem = "device " + std::to_string(id) + " is not in the run";
      else if (own_only && devices.at(id).route != route)
        problem = "device " + std::to_string(id) + " is hosted by another node: a node retires only its own devices";
    if (problem.empty())
      for (int id : ids) devices[id].leaving = true;
    w.devices = ids;
  }
  if (!problem.empty()) {
    w.reason = problem;
    w.devices.clear();
  } else {
    w.accepted = true;
    w.model = cfg.model;
    w.reason = "leaving after the current step";
    log->info("'{}' asks devices to leave ({}): {} device(s)", m.node, m.reason, w.devices.size());
  }
  reply(route, w);
}

// Nodes that went silent: their devices are lost (issue 8 recovers from that; today the
// step fails at once with an error naming the node).
void remote_devices::impl::check_nodes() {
  std::vector<std::pair<std::string, remote_device_handle>> notify;
  {
    std::lock_guard<std::mutex> lock(mu);
    const double now = now_s();
    for (auto it = nodes.begin(); it != nodes.end();) {
      if (!it->second.lost(now)) {
        ++it;
        continue;
      }
      const std::string why = "node '" + it->first + "' lost (no message for " + std::to_string(now - it->second.last_s()).substr(0, 4) +
                              " s, " + std::to_string(it->second.allowed_s()).substr(0, 4) + " s allowed)";
      log->warn("{}", why);
      for (auto& [id, e] : devices)
        if (e.route == it->first && !e.lost) {
          e.lost = true;
          if (e.proxy) notify.emplace_back(why, e.proxy);
        }
      data_sockets.erase(it->first);
      node_data.erase(it->first);
      it = nodes.erase(it);
      membership_changed = true;
    }
  }
  for (const auto& [why, proxy] : notify) {
    caf::anon_send(proxy, remote_atom::value, remote::call_to(0, wire::ops::error{why}), std::vector<model::tensor>{});
  }
}

}  // namespace dynapar::actors::remote
