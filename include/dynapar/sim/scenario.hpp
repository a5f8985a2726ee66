// A simulation scenario (docs/FORMATS.md, "Scenario files"): a base cluster, the planner's
// settings, and dynamics over slots. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/problem.hpp"

namespace dynapar::sim {

// Piecewise constant in slots: `value` holds from `slot` until the next point.
struct trace_point {
  int slot = 0;
  double value = 1;
};

struct device_trace {
  int device = 0;                       // device id
  std::vector<trace_point> speed;       // multiplier on the nominal speed
  std::vector<trace_point> available;   // 1 available, 0 not
  std::vector<trace_point> price;       // multiplier on the nominal price
};

enum class link_scope { same_node, same_rack, cross_rack };

struct link_trace {
  link_scope scope = link_scope::cross_rack;
  std::vector<trace_point> bandwidth;   // multiplier on the tier's bandwidth
};

enum class event_kind { join, leave, fail };

struct event {
  int slot = 0;
  event_kind kind = event_kind::leave;
  int device = 0;
};

// Seeded stochastic processes; each off when its rate is zero.
struct stochastic {
  double walk_sigma = 0;          // random walk of each device's speed multiplier, per slot
  double walk_min = 0.5, walk_max = 1.0;
  double burst_start = 0;         // Markov-modulated background load: P(off -> on) per slot
  double burst_end = 0.2;         // P(on -> off) per slot
  double burst_slowdown = 0.5;    // speed multiplier while a burst is on
  double price_change = 0;        // spot price: P(new price) per slot and device
  double price_low = 0.5, price_high = 2.0;  // multiplier range of the new price
  double departure_rate = 0;      // P(an available device departs) per slot
  int rejoin_after = 50;          // slots until a departed device returns (0: never)
};

struct scenario {
  std::string name;
  planner::model_profile model;
  planner::cluster_state cluster;       // nominal specs; `available` is the state at slot 0
  planner::planner_config cfg;
  planner::budgets budget;
  int slots = 100;
  std::vector<std::string> policies;
  std::uint64_t seed = 1;
  double measurement_noise = 0.03;      // relative std-dev of measured times
  double estimate_smoothing = 0.5;      // weight of the newest measurement
  double detect_s = 0.5;                // time to notice a failed device
  // The controller's hysteresis (control::controller_config), as training has it: a new plan
  // must gain more than the predictions' noise plus its migration over this many slots. The
  // planner scores a plan's migration over them too, as in training (default the same, 2).
  bool hysteresis = false;
  double plan_lifetime_slots = 2;
  std::vector<device_trace> traces;
  std::vector<link_trace> link_traces;
  std::vector<event> events;
  stochastic random;
};

}  // namespace dynapar::sim
