// The devices and links of one slot (docs/MODEL.md), as plain data, plus an
// index-based lookup table the planner's hot loops use. Pure; share read-only.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"

namespace dynapar::planner {

inline constexpr double unlimited = std::numeric_limits<double>::infinity();

struct device_spec {
  int id = 0;                  // stable across slots, joins and leaves
  std::string name;
  double speed = 1.0;          // time on this device = reference time / speed
  double memory_bytes = 16e9;
  double price_per_s = 0.0;    // cost of holding the device for one second
  double power_w = 0.0;        // for per-device energy budgets
  bool available = true;
  int node = -1;               // -1: a node of its own
  int rack = 0;
  double nic_bw = unlimited;   // caps every link of this device (edge uplinks), bytes/s
};

struct link_tier {
  double bw = 0;   // bytes/s
  double lat = 0;  // seconds
};

// Links by locality unless overridden per pair: same node, same rack, across racks.
struct link_tiers {
  link_tier same_node{100e9, 5e-6};     // NVLink-class
  link_tier same_rack{12.5e9, 20e-6};   // 100 Gbit/s
  link_tier cross_rack{1.25e9, 100e-6}; // 10 Gbit/s
};

struct link_override {
  int a = 0, b = 0;  // device ids, symmetric
  double bw = 0, lat = 0;
};

struct cluster_state {
  std::vector<device_spec> devices;
  link_tiers tiers;
  std::vector<link_override> overrides;
  double checkpoint_bw = 1e9;  // bytes/s from stable storage, when no replica survives
};

// Unique ids, positive speeds and memory, known ids in overrides, positive bandwidths.
status validate(const cluster_state& cluster);

// Lookups by device index (position in cluster_state::devices), O(1).
class link_table {
 public:
  explicit link_table(const cluster_state& cluster);
  double bw(int i, int j) const;
  double lat(int i, int j) const;
  int index_of(int id) const;  // -1 if unknown

 private:
  const link_tier& tier(int i, int j) const;
  const cluster_state* cluster_;
  std::vector<long> node_key_;
  std::unordered_map<std::uint64_t, link_tier> overrides_;
  std::unordered_map<int, int> index_of_;
};

}  // namespace dynapar::planner
