// A node process's actors (docs/DISTRIBUTED.md): a bridge that turns the controller's device
// calls into device messages and their answers back into calls, and stubs standing for
// devices on other nodes and for the controller, so that the device actors never know where
// their neighbours are. The network thread (node.cpp) owns the sockets; the actors post
// through an outbox.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/device_actor.hpp"
#include "actors/remote/frames.hpp"
#include "comm/packet.hpp"

namespace dynapar::actors::remote {

// What the node's actors and its network thread share.
struct node_shared {
  std::unique_ptr<comm::outbox> out;
  // Fault injection: until then the node is silent; hung (nothing handled, sent or
  // received) or cut off (what comes and goes is dropped).
  std::atomic<std::int64_t> silent_until_us{0};
  std::atomic<bool> cut_off{false};
  model::layer_source layers;  // the job's model, one layer at a time: a node builds only what it holds
  // The job's training and validation sets, when this node holds the controller's.
  std::shared_ptr<const data::dataset> data, val;
  std::atomic<int> live{0};
  std::string name;
  std::string shard_dir;  // node_config::shard_dir
  void post(const wire::device_call& c, const std::vector<model::tensor>& ts = {}) {
    if (auto st = out->post(remote::pack(c, ts, name)); !st) warn(st.err().message);
  }
  // Data for a device on another node: the network thread sends it straight to that node
  // (node_mesh), or through the controller while no peer is known to host the device.
  void post_data(const wire::device_call& c, const std::vector<model::tensor>& ts) {
    auto p = remote::pack(c, ts, name);
    p.route = data_route_prefix + std::to_string(c.device);
    if (auto st = out->post(std::move(p)); !st) warn(st.err().message);
  }
  static constexpr const char* data_route_prefix = "data:";
  void answer(const wire::device_call& to, wire::device_op op, const std::vector<model::tensor>& ts = {}) {
    wire::device_call c;
    c.op = std::move(op);
    c.id = to.id;
    c.device = to.device;
    post(c, ts);
  }
  void fail(const wire::device_call& to, const std::string& why) { answer(to, wire::ops::error{remote::clip(why)}); }

 private:
  static void warn(const std::string& what);
};

// The bridge over this node's device actors (id -> actor): it takes the calls and data the
// network thread received.
using node_bridge_handle = caf::typed_actor<caf::reacts_to<remote_atom, wire::device_call, std::vector<model::tensor>>>;

node_bridge_handle spawn_node_bridge(caf::actor_system& sys, std::shared_ptr<node_shared> sh, std::map<int, device_handle> devices);

}  // namespace dynapar::actors::remote
