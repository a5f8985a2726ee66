#include "actors/remote/mesh.hpp"

#include "logging/logging.hpp"

namespace dynapar::actors::remote {

result<std::unique_ptr<node_mesh>> node_mesh::start(zmq::context_t& ctx, const std::string& name, const mesh_config& cfg) {
  if (auto st = comm::check_endpoint(cfg.bind, cfg.allow_remote, cfg.keys.has_value()); !st)
    return make_error(st.err().code, "--data-bind: " + st.err().message);
  const auto host = cfg.bind.substr(6, cfg.bind.rfind(':') - 6);
  if (host == "*" || host == "0.0.0.0" || host == "[::]")
    return make_error("bad_endpoint", "--data-bind " + cfg.bind + ": other nodes connect to the address this node announces; name "
                                      "this machine's own address (tcp://HOST:PORT), not a wildcard");
  std::unique_ptr<node_mesh> m(new node_mesh(ctx, name));
  m->keys_ = cfg.keys;
  if (cfg.keys) {
    // No peers yet: the handler admits nobody until the controller's first list.
    auto a = comm::authenticator::start(ctx, {}, [](const std::string& why) { logging::get("node")->warn("data socket: {}", why); });
    if (!a) return a.err();
    m->auth_ = std::move(*a);
    if (auto st = comm::make_curve_server(m->router_, comm::server_keys{cfg.keys->own, {}, ""}); !st) return st.err();
  }
  try {
    m->router_.set(zmq::sockopt::linger, 0);
    m->router_.set(zmq::sockopt::maxmsgsize, cfg.max_frame_bytes);
    // A peer that restarted under its name takes its identity over from the dead connection.
    m->router_.set(zmq::sockopt::router_handover, 1);
    m->router_.bind(cfg.bind);
    m->endpoint_ = m->router_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return make_error("bind", "--data-bind: cannot listen on " + cfg.bind + ": " + e.what());
  }
  return m;
}

void node_mesh::update(const wire::peers_msg& m) {
  if (m.generation < generation_) return;
  generation_ = m.generation;
  peers_.clear();
  host_of_.clear();
  std::vector<comm::public_key> admitted;
  for (const auto& p : m.peers) {
    peers_[p.node] = p;
    for (int d : p.devices) host_of_[d] = p.node;
    // Named by the key itself: a packet then says which key sent it (packet::peer), whatever
    // routing id it came under, and nodes that share a key need no name for it.
    if (!p.public_key.empty()) admitted.push_back({p.public_key, comm::key_role::node, p.public_key});
  }
  if (auth_) auth_->authorize(std::move(admitted));
  for (auto it = links_.begin(); it != links_.end();) {
    auto p = peers_.find(it->first);
    const bool same = p != peers_.end() && p->second.endpoint == it->second.endpoint && p->second.public_key == it->second.key;
    it = same ? std::next(it) : links_.erase(it);
  }
}

void node_mesh::forget() {
  update(wire::peers_msg{generation_, {}});
  generation_ = 0;
}

zmq::socket_t* node_mesh::dealer_for(const wire::peer_entry& p) {
  auto& l = links_[p.node];
  if (l.socket) return l.socket.get();
  try {
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::routing_id, name_);
    s->set(zmq::sockopt::linger, 0);
    // Never block the network thread: a peer that is slow to drain queues here, up to a bound
    // (send() drops and counts past it); one that died is dropped from the membership by the
    // controller, and its queue with it.
    s->set(zmq::sockopt::sndhwm, comm::queue_messages);
    if (keys_) {
      if (p.public_key.empty()) {
        logging::get("node")->warn("peer '{}' has no key while this node speaks CURVE: its devices are reached through the controller",
                                   p.node);
        links_.erase(p.node);
        return nullptr;
      }
      if (auto st = comm::make_curve_client(*s, comm::client_keys{keys_->own, p.public_key}); !st) {
        logging::get("node")->warn("peer '{}': {}", p.node, st.err().message);
        links_.erase(p.node);
        return nullptr;
      }
    }
    s->connect(p.endpoint);
    l.endpoint = p.endpoint;
    l.key = p.public_key;
    l.socket = std::move(s);
    return l.socket.get();
  } catch (const zmq::error_t& e) {
    logging::get("node")->warn("peer '{}' at {}: {}", p.node, p.endpoint, e.what());
    links_.erase(p.node);
    return nullptr;
  }
}

bool node_mesh::send(int device, comm::packet& p) {
  auto h = host_of_.find(device);
  if (h == host_of_.end()) return false;
  auto* s = dealer_for(peers_.at(h->second));
  if (!s) return false;
  if (auto st = comm::send_packet(*s, std::move(p), false, true); !st && (st.err().code != "full" || full_++ % 1000 == 0))
    logging::get("node")->warn("to device {} on '{}': {} ({} dropped for a full queue so far)", device, h->second, st.err().message, full_);
  return true;
}

result<std::optional<comm::packet>> node_mesh::receive(std::chrono::milliseconds wait) {
  // A bounded number of strangers' packets per call, so that a flood cannot hold the
  // network thread (heartbeats, the controller's calls) in here.
  for (int dropped = 0; dropped < 64; ++dropped) {
    auto p = comm::recv_packet(router_, true, wait);
    if (!p || !*p) return p;
    // The sender must still be a member now (a node the controller declared lost is fenced at
    // once). Over CURVE the handler admitted its key when it connected, and that key must be
    // the one the controller lists for the routing id it sends under: a member cannot speak
    // for another.
    const auto it = peers_.find((*p)->route);
    if (it != peers_.end() && (!keys_ || (*p)->peer == comm::to_string(comm::key_role::node) + ":" + it->second.public_key))
      return p;
    ++refused_;
    logging::get("node")->warn("dropped data from '{}', not a current peer (membership generation {})", (*p)->route, generation_);
    wait = std::chrono::milliseconds(0);
  }
  return std::optional<comm::packet>{};
}

}  // namespace dynapar::actors::remote
