// Scenario YAML (docs/FORMATS.md): a cluster file plus model, slots, policies, noise and
// dynamics. Errors name the field.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "config/yaml_fields.hpp"
#include "sim/scenario.hpp"

namespace dynapar::config {

result<sim::scenario> load_scenario_file(const std::string& path);
result<sim::scenario> parse_scenario(const YAML::Node& doc, const std::string& name);
// The `dynamics` section of `top` (if any) into s.traces, link_traces, events and random;
// device ids are checked against s.cluster. Throws field_error (loaders catch it).
void parse_dynamics(const fields& top, sim::scenario& s);

}  // namespace dynapar::config
