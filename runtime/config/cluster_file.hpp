// The cluster YAML (docs/FORMATS.md): devices, links, budgets and planner settings. The
// scenario and job files embed the same sections, so they parse through these functions.
#pragma once

#include <map>
#include <string>

#include <yaml-cpp/yaml.h>

#include "planner/problem.hpp"

namespace dynapar::config {

struct cluster_file {
  planner::cluster_state cluster;
  planner::planner_config planner;
  planner::budgets budget;
  std::string model;  // optional: a built-in profile name or a profile JSON path
  // Where each device computes when the runtime runs it: device id -> "cuda:N" (docs/GPU.md).
  // Devices not listed compute on the CPU. The planner sees speeds, not places.
  std::map<int, std::string> places;
  // A job file without `devices:`: the cluster is a pool of `max_devices` ids that nodes
  // describe as they join (`dynapar node --devices auto`); it trains over nodes only.
  bool described = false;
};

result<cluster_file> load_cluster_file(const std::string& path);
// From an already parsed document; `allowed_extra` lists keys a containing format adds.
result<cluster_file> parse_cluster(const YAML::Node& doc, std::initializer_list<const char*> allowed_extra = {});

}  // namespace dynapar::config
