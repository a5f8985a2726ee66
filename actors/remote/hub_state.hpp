// The controller process's network hub behind remote_devices (private to actors/): one
// thread owns the ZeroMQ ROUTER, the device registry and the CURVE authenticator; the proxy
// actors (proxy.hpp) post device calls through it.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "actors/remote/hub.hpp"
#include "actors/remote/frames.hpp"
#include "actors/remote/proxy.hpp"
#include "comm/curve.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::remote {

struct remote_devices::impl {
  impl(caf::actor_system& s, std::shared_ptr<const model::model_chain> m, remote_config c)
      : sys(s), model(std::move(m)), cfg(std::move(c)), router(ctx, zmq::socket_type::router), pull(ctx, zmq::socket_type::pull) {}

  caf::actor_system& sys;
  std::shared_ptr<const model::model_chain> model;
  remote_config cfg;
  zmq::context_t ctx{1};
  std::unique_ptr<comm::authenticator> auth;  // with keys: the context's ZAP handler
  zmq::socket_t router, pull;
  std::unique_ptr<comm::outbox> out;
  std::string endpoint;
  std::string model_hash;  // a TorchScript model's SHA-256: nodes check their file against it
  std::vector<std::uint64_t> fresh;  // each layer's state hash before any step (frames.hpp placed_layer)
  model::layer_source layers;        // the model's, for the layers nodes send
  struct entry {
    std::string route;  // the node's identity on the ROUTER
    remote_device_handle proxy;
    bool leaving = false;
    bool lost = false;  // its node went silent
    std::uint64_t gen = 0;  // which hosting of the device (a lost one may join again)
    std::optional<double> described;  // bytes of memory, when its node described it (id -1)
    std::optional<int> host;          // then its host's number (described_host)
  };
  std::uint64_t next_gen = 1;
  mutable std::mutex mu;
  std::map<int, entry> devices;
  std::map<std::string, int> hosts;  // the hosts of described devices, numbered as first seen
  std::map<std::string, control::silence_detector> nodes;  // when each was last heard from, and how long it may be silent
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); }
  std::map<std::string, std::chrono::steady_clock::time_point> told_rejoin;  // unknown nodes, when last told to join again
  rate_limit strangers{cfg.strangers};  // what routes that have not joined may send (network thread only)
  std::atomic<std::uint64_t> strangers_refused{0};
  std::vector<sim::fault> faults;                  // dynapar inject: for the driver
  // The data plane: each node's data socket and the key it proved (CURVE), handed to every
  // node as a peers_msg whenever membership changes (broadcast_peers).
  struct data_socket {
    std::string endpoint, public_key;
  };
  std::map<std::string, data_socket> data_sockets;  // by route
  std::uint64_t peers_generation = 0;
  std::atomic<bool> membership_changed{false};  // set off the network thread (a retirement)
  std::thread net;
  std::atomic<bool> stopping{false};
  // Tensor bytes through this process (remote_devices::tensor_bytes): relayed between nodes
  // (only while a node does not know its peer yet), gathered from nodes (layer copies),
  // gradients (partial sums for the central sum), sent to nodes (sums, layers), inputs.
  std::atomic<std::uint64_t> relayed{0}, gathered{0}, sent{0}, inputs{0}, gradients{0};
  std::uint64_t refused_relays = 0;  // data a node sent as another node's device's (not relayed)
  // By route: the data set fingerprint the node's heartbeat proved (0: none). Absent while a
  // node that was offered the job's data set has not said it loaded it (Heartbeat.loading).
  std::map<std::string, std::uint64_t> node_data;
  std::map<std::string, double> node_peak;  // MB, by route: the most a node's heartbeats said
  bool holds_data(const std::string& route) const {
    std::lock_guard<std::mutex> lock(mu);
    return holds_data_locked(route);
  }
  bool holds_data_locked(const std::string& route) const {
    auto it = node_data.find(route);
    return cfg.data_hash != 0 && it != node_data.end() && it->second == cfg.data_hash;
  }
  // A device takes part once it is neither leaving nor lost, and its node is not still
  // loading the data set it was offered: one busy reading files would miss its first calls.
  bool present_locked(const entry& e) const {
    return !e.leaving && !e.lost && (cfg.data_hash == 0 || node_data.count(e.route));
  }
  std::shared_ptr<spdlog::logger> log = logging::get("remote");

  // A device call to the device's node, through the network thread.
  // Its tensors' bytes count as `counted` (sent by default).
  void post(const std::string& route, const wire::device_call& c, const std::vector<model::tensor>& ts = {},
            std::atomic<std::uint64_t>* counted = nullptr);
  void reply(const std::string& route, wire::body b);  // from the network thread only
  // Every message out of the router (network thread only): never waits for a node that
  // stopped reading; what a full queue drops is counted and logged, what goes to a route
  // that is gone (a lost node, a client that left) is dropped without a word, as before.
  void send_out(comm::packet p);
  std::uint64_t dropped_full = 0;
  // A proxy stopped. Its node (if the device is still its node's: a lost node's devices may
  // have joined again from elsewhere) retires the device.
  void retired(int id, std::uint64_t gen);
  void loop();
  void check_nodes();
  void handle(comm::packet p);
  void on_join(const std::string& route, const std::string& peer, const wire::join_msg& m);
  // The node at `route` was asked for `bytes` (a layer copy): its heartbeats wait behind that
  // answer, so it is not lost while the answer may still be coming at a slow rate (20 MB/s:
  // encrypted, on a loaded machine; docs/RELIABILITY.md, "Detection").
  void expect_large(const std::string& route, double bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = nodes.find(route); it != nodes.end()) it->second.busy_until(now_s() + bytes / 20e6);
  }
  void broadcast_peers();  // from the network thread only
  // `role`: the key the sender proved (none without CURVE). An operator may retire any
  // device; a node key, or a joined node, only those its route hosts.
  void on_leave(const std::string& route, const wire::leave_msg& m, std::optional<comm::key_role> role);
  void on_fault(const std::string& route, const wire::fault_command& f);
  void refuse(const comm::packet& p, const wire::body& b, const std::string& why);
};

}  // namespace dynapar::actors::remote
