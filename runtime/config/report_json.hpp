// Plans and their explanations as JSON, for `dynapar plan --json` and the simulator's logs.
#pragma once

#include <nlohmann/json.hpp>

#include "planner/evaluate.hpp"

namespace dynapar::config {

nlohmann::json plan_to_json(const planner::plan& p);
nlohmann::json report_to_json(const std::string& policy, const planner::plan_report& r);

}  // namespace dynapar::config
