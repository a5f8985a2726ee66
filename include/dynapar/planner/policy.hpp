// One interface for the system's policy, the baselines and the oracle (docs/MODEL.md,
// Baselines), so the simulator and the runtime run any of them by name. A policy may keep state
// between slots (static ones remember their plan); not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/problem.hpp"

namespace dynapar::planner {

struct decision_context {
  const problem& prob;
  const plan* previous = nullptr;   // the plan in force, if any
  queue_state queues;               // backlogs at the start of the slot
  std::int64_t slot = 0;
};

class policy {
 public:
  virtual ~policy() = default;
  virtual std::string name() const = 0;
  virtual result<plan> decide(const decision_context& ctx) = 0;
  // Whether its steps use within-step dispatch (planner_config::dispatch_probe): dynapar's
  // own policies do; the baselines run as their papers set them up, shares fixed a step.
  virtual bool dispatches() const { return true; }
};

// The names make_policy knows, in the order results are reported.
const std::vector<std::string>& policy_names();
result<std::unique_ptr<policy>> make_policy(const std::string& name);

// The largest instance the oracle enumerates.
inline constexpr int oracle_max_devices = 7;

}  // namespace dynapar::planner
