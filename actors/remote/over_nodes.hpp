// Training with the devices in node processes, from the controller's side, as a library call:
// listen, start the local nodes (`launch --local N`) and restart those that crash, wait for
// the devices that start the run, meet for Gloo where an inexact sum uses it, train, stop the
// nodes. `dynapar controller`, `launch` and `bench runtime --local N` parse their flags into
// these options and call it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/keys.hpp"
#include "training/prepare.hpp"
#include "training/records.hpp"

namespace dynapar::actors::remote {

struct over_nodes_options {
  std::string bind = "tcp://127.0.0.1:5555";
  bool allow_remote = false;
  double wait_s = 60;       // for the devices that start the run
  int min_devices = 0;      // start with this many of them (0: all)
  // launch: node processes to start, this process's binary run as `node` (the dynapar CLI's;
  // a program of your own leaves it 0, and its nodes join with `dynapar node`).
  int local_nodes = 0;
  std::vector<int> local_devices;  // launch: the devices they host (empty: the job's)
  double respawn_s = -1;    // launch: restart a node that crashed after this many seconds (< 0: never)
  double node_timeout_s = 0;  // > 0: a node silent this long is lost; 0: adapted to each node's gaps
  std::string keys;           // --keys DIR: serve CURVE (docs/SECURITY.md); launch: also the nodes' keys
  bool no_keys = false;       // plain TCP on loopback instead of throwaway keys
  bool central_sum = false;   // the driver gathers and adds the gradients (not the holders)
  bool send_inputs = false;   // inputs and targets travel as tensors (not as sample ids)
  std::string inexact_sum = "auto";  // exact: false: "gloo", "holders", or auto (Gloo where it may run)
  std::string address_file;   // controller: where to publish the endpoint nodes dial (empty: nowhere)
  std::optional<comm::server_keys> server;  // loaded from `keys` (load_keys)
};

// `keys` for the controller; without it, throwaway keys in OUT/keys, OUT/keys-controller and
// OUT/keys-operator (comm::write_local_keys; so that the common path is the secure one: no
// other local account can join, read layers or inject faults) unless no_keys, for the
// devices of the job file at `job`. The caller checked the endpoint first: beyond loopback
// needs real keys.
status load_keys(over_nodes_options& o, const std::string& out, const std::string& job);

result<training::train_outcome> train_over_nodes(training::prepared_job& p, const training::train_callbacks& cb,
                                                 const over_nodes_options& o);

}  // namespace dynapar::actors::remote
