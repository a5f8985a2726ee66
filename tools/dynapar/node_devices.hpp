// `dynapar node`'s options and the devices they name: ids of the job's (--device, or a Slurm
// task's range), or devices the node describes itself (--devices auto).
#pragma once

#include <string>
#include <vector>

#include "actors/remote/node.hpp"
#include "common/result.hpp"
#include "launch/slurm.hpp"
#include "planner/cluster.hpp"

namespace dynapar::cli {

struct node_options {
  actors::remote::node_config node;
  std::vector<std::string> devices;
  std::string described;          // --devices auto[:K]: devices the controller numbers
  double memory_gb = 0;           // each described device's memory (0: measured)
  bool leave = false;
  std::string keys, key_name;
  bool slurm = false;             // devices, name and key from the SLURM_* variables
  launch::slurm_devices slurm_devices;
};

// The devices `o` names, in the node's join: by id, or id -1 with their memory (described).
// Under --slurm, the task's devices and name from `env`. A clear error for flags that
// contradict each other or name no device.
result<std::vector<planner::device_spec>> node_devices(node_options& o, const launch::env_lookup& env);

}  // namespace dynapar::cli
