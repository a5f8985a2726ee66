// The controller process's side of node processes (docs/DISTRIBUTED.md). One network thread
// owns a ZeroMQ ROUTER socket: nodes connect with DEALER sockets and join with their device
// specs; every device they host gets a proxy actor here that speaks the device actor's
// messages (actors/messages.hpp) and forwards them as device calls. Activations, gradients
// and migrating layers between nodes go node to node (mesh.hpp): the controller tells
// every node who its peers are. The driver sees the devices through device_directory, as if
// they were local.
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "actors/session.hpp"
#include "comm/keys.hpp"
#include "control/silence.hpp"
#include "common/rate_limit.hpp"
#include "data/source.hpp"
#include "model/api.hpp"

namespace dynapar::actors::remote {

struct remote_config {
  std::string bind = "tcp://127.0.0.1:0";  // port 0: any free port (endpoint() says which)
  bool allow_remote = false;                // bind beyond loopback (needs `keys` too)
  // CURVE (docs/SECURITY.md): serve with this key pair and admit only these clients. None:
  // plain TCP, accepted on loopback only.
  std::optional<comm::server_keys> keys;
  // A peer that sends a larger frame is disconnected before it is read (ZMQ_MAXMSGSIZE); the
  // largest a run sends is one tensor (a layer's weight, a stage's activations).
  std::int64_t max_frame_bytes = std::int64_t{1} << 30;
  // Routes (nodes and short-lived clients) remembered at once; a join beyond is refused, so a
  // flood of identities cannot grow the controller's tables without bound.
  std::size_t max_routes = 4096;
  // What routes that have not joined (new nodes, fenced ones, `inject` and `node --leave`)
  // may send, by route and all together; the rest is dropped before it is decoded, so that a
  // flood cannot hold the network thread.
  rate_limit_config strangers;
  double heartbeat_s = 0.5;                 // to every node, so that nodes notice a dead controller
  // A node silent too long is lost: its devices leave the run, and every call waiting on
  // them fails at once (no wait until the step timeout). How long: `node_timeout_s` if > 0,
  // else adapted to the gaps between each node's own messages (control::silence_detector;
  // nodes beat every 0.1 s). Checked every ~50 ms.
  double node_timeout_s = 0;
  control::silence_config silence;
  // What a node needs to hold layers: the model it rebuilds itself and the optimizer.
  std::string model;
  std::uint64_t seed = 1;
  model::optimizer_config optimizer;
  std::set<int> devices;                    // ids a node may bring (the job's cluster)
  // The job's training set, which a node loads itself, and its fingerprint here: a node
  // whose heartbeat proves the same fingerprint gets a step's sample ids, not its input and
  // target tensors. 0: every node gets the tensors.
  data::source data;
  std::uint64_t data_hash = 0;
};

class remote_devices : public device_directory {
 public:
  static result<std::shared_ptr<remote_devices>> start(caf::actor_system& sys, std::shared_ptr<const model::model_chain> m,
                                                       remote_config cfg);
  ~remote_devices() override;
  bool present(int id) const override;
  device_handle proxy(int id) override;
  bool lost(int id) const override;
  std::vector<sim::fault> injected() override;
  std::optional<double> described_memory(int id) const override;
  std::optional<int> described_host(int id) const override;
  bool builds_samples(int id) const override;
  bool hosted(int id) const;  // registered: present, leaving, or lost and not yet let go
  std::string endpoint() const;
  std::set<int> present_ids() const;
  // Tensor bytes that passed through this (the controller's) process so far, by kind:
  // "relayed" between devices on nodes, "gathered" from nodes (layer copies: checkpoints,
  // epochs' evaluations, the end), "gradients" gathered for the central sum (--central-sum),
  // "inputs" sent to nodes (a step's inputs and targets, to a node without the data set),
  // "sent" to nodes (gradient sums, layers placed from here).
  std::map<std::string, double> tensor_bytes() const;
  // Each node's peak resident memory in MB, as its latest heartbeat said, by node (route).
  std::map<std::string, double> node_peak_rss_mb() const;
  // Messages from routes that have not joined, dropped over remote_config::strangers.
  std::uint64_t strangers_refused() const;
  // Stops the network thread after sending what is queued (device retirements included).
  void stop();

  struct impl;

 private:
  explicit remote_devices(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  std::shared_ptr<impl> impl_;
};

}  // namespace dynapar::actors::remote
