// A node's data plane (docs/DISTRIBUTED.md, "Data plane"): a ROUTER socket that other nodes
// send activations, gradients and migrating layers to, and a DEALER per peer node to send
// them, so that tensors between nodes never pass through the controller. Who the peers are,
// where they listen and which key each proves comes from the controller (wire::peers_msg);
// data from anyone else is dropped. Owned by the node's network thread: ZeroMQ sockets are
// not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "comm/curve.hpp"
#include "comm/packet.hpp"
#include "common/result.hpp"
#include "wire/messages.hpp"

namespace dynapar::actors::remote {

struct mesh_config {
  // Where the data socket listens; port 0: any free port. Other nodes must reach this
  // address: beyond one machine, this machine's own address (a wildcard is refused, as it
  // cannot be announced).
  std::string bind = "tcp://127.0.0.1:0";
  bool allow_remote = false;
  // CURVE: the data socket serves with this node's pair and admits the current peers' keys
  // only; sends pin each peer's key. None: plain TCP (loopback only).
  std::optional<comm::client_keys> keys;
  std::int64_t max_frame_bytes = std::int64_t{1} << 30;  // a larger frame disconnects its sender
};

class node_mesh {
 public:
  static result<std::unique_ptr<node_mesh>> start(zmq::context_t& ctx, const std::string& name, const mesh_config& cfg);

  const std::string& endpoint() const { return endpoint_; }
  zmq::socket_t& socket() { return router_; }  // poll it for input
  std::uint64_t generation() const { return generation_; }

  // The controller's newest membership. An older generation is ignored; peers that left are
  // disconnected, and a peer that moved (new address or key) is connected afresh.
  void update(const wire::peers_msg& m);
  // A new session with a controller (which may have restarted): no peers until it says.
  void forget();
  // To the node hosting `device` (the packet is moved from); false when no peer does, and
  // the packet is left as it was (the caller relays it through the controller instead).
  bool send(int device, comm::packet& p);
  // The next packet from a current peer, waiting up to `wait`; packets from others are
  // dropped and counted (`refused`). Nothing: none waiting (or only strangers' so far).
  result<std::optional<comm::packet>> receive(std::chrono::milliseconds wait);
  std::uint64_t refused() const { return refused_; }
  // Whether the controller's newest membership has `node` hosting `device`: a peer's data
  // that names a source device is taken only from the node hosting it (remote::data_source).
  bool hosts(const std::string& node, int device) const {
    const auto it = host_of_.find(device);
    return it != host_of_.end() && it->second == node;
  }
  void count_refused() { ++refused_; }
  std::uint64_t dropped_full() const { return full_; }  // sends past a peer's bound (comm::queue_messages)

 private:
  node_mesh(zmq::context_t& ctx, std::string name) : ctx_(ctx), name_(std::move(name)), router_(ctx, zmq::socket_type::router) {}
  zmq::socket_t* dealer_for(const wire::peer_entry& p);

  zmq::context_t& ctx_;
  std::string name_;
  std::optional<comm::client_keys> keys_;
  std::unique_ptr<comm::authenticator> auth_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::uint64_t generation_ = 0;
  std::map<std::string, wire::peer_entry> peers_;  // by node name
  std::map<int, std::string> host_of_;            // device -> node
  struct link {
    std::string endpoint, key;
    std::unique_ptr<zmq::socket_t> socket;
  };
  std::map<std::string, link> links_;  // by node name, made on first send
  std::uint64_t refused_ = 0, full_ = 0;
};

}  // namespace dynapar::actors::remote
