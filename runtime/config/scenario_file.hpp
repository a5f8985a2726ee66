// Scenario YAML (docs/FORMATS.md): a cluster file plus model, slots, policies, noise and
// dynamics. Errors name the field.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/scenario.hpp"

namespace dynapar::config {

result<sim::scenario> load_scenario_file(const std::string& path);
result<sim::scenario> parse_scenario(const YAML::Node& doc, const std::string& name);

}  // namespace dynapar::config
