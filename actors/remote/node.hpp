// A node process's side (dynapar node; docs/DISTRIBUTED.md): connects a ZeroMQ DEALER socket
// to the controller, joins with its device specs, and hosts a device actor per accepted
// device. A bridge actor turns the controller's device calls into device messages and their
// answers back into calls; stub actors stand for devices on other nodes, so the device
// actors themselves do not know where their neighbours are.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/keys.hpp"
#include "common/result.hpp"
#include "data/source.hpp"
#include "planner/cluster.hpp"
#include "wire/messages.hpp"

namespace dynapar::actors::remote {

struct node_config {
  std::string controller;             // tcp://HOST:PORT
  std::string name;                   // unique per node; empty: node-<pid>
  std::vector<planner::device_spec> devices;
  bool allow_remote = false;          // a controller beyond loopback (needs `keys` too)
  std::optional<comm::client_keys> keys;  // CURVE: this node's key, the controller's pinned (docs/SECURITY.md)
  double connect_timeout_s = 10;      // for the controller's welcome
  double controller_timeout_s = 10;   // silence (no heartbeat) before giving up
  double heartbeat_s = 0.1;           // the controller's node-loss deadline adapts to these gaps (control::silence_detector)
  int scheduler_threads = 2;          // the bridge and stubs (devices are detached threads)
  std::string place = "cpu";          // where its devices compute: "cpu" or "cuda:N" (checked)
  // A TorchScript model is loaded from here (the file of the controller's name) when set,
  // else from the path the controller names; either way only if it hashes to the Welcome's
  // modelHash.
  std::string model_dir;
  // The job's own data files (kinds npy, tokens, images) are read only from here: the folder
  // of the controller's name in it. Empty: not read (the controller sends each step's inputs).
  std::string data_dir;
  // Where this node takes data from other nodes (mesh.hpp): activations, gradients and
  // layers go node to node, not through the controller. Port 0: any free port.
  std::string data_bind = "tcp://127.0.0.1:0";
  // The only directory its devices write checkpoint shards to and read them from, under the
  // names the controller gives (training/shard_names.hpp); empty: no shard is written here,
  // and the controller gathers the layers instead.
  std::string shard_dir;
  // Where its devices keep Adam's moments between steps (`--offload-optimizer`); empty: in memory.
  std::string offload_dir;
  // How it loads a split of the job's data set (the controller's source, its path already in
  // data_dir); unset: model::load_data. A test's is slow.
  std::function<result<data::dataset>(const data::source&, bool train)> load_data;
};

struct node_outcome {
  int devices = 0;                    // accepted
  std::int64_t calls = 0;             // device calls received
  bool left = false;                  // asked to leave (signal) before the run ended
  int rejoins = 0;                    // times the controller asked it to join again
};

// Runs until the controller retires every device of this node. Setting `leave` (a signal
// handler does) asks the controller to let them go after the current step; their layers
// move away first.
result<node_outcome> run_node(const node_config& cfg, const std::atomic<bool>& leave);

// A short-lived client of the controller (dynapar node --leave, dynapar inject).
struct control_client {
  std::string controller;                 // tcp://HOST:PORT
  double timeout_s = 10;                  // for the answer
  bool allow_remote = false;              // a controller beyond loopback (needs `keys` too)
  std::optional<comm::client_keys> keys;  // CURVE: an operator's (or node's) key, the controller's pinned
};

// dynapar node --leave: asks the controller to retire `devices` after the current step.
status request_leave(const control_client& c, const std::vector<int>& devices);

// dynapar inject: a FaultCommand to the controller (docs/RELIABILITY.md); refused with a
// reason when the controller cannot carry it out (join, a partition between two devices),
// or when the client's key is not an operator's.
status request_fault(const control_client& c, const wire::fault_command& f);

}  // namespace dynapar::actors::remote
