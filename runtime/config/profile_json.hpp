// Model profile JSON (docs/FORMATS.md) in both directions, and name-or-path resolution.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "planner/profile.hpp"

namespace dynapar::config {

result<planner::model_profile> profile_from_json(const nlohmann::json& j);
nlohmann::json profile_to_json(const planner::model_profile& m);
// A built-in profile name ("resnet50") or the path of a profile JSON file.
result<planner::model_profile> load_profile(const std::string& name_or_path);

}  // namespace dynapar::config
