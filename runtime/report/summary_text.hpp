// The few lines a person reads at the end of a run; summary.json keeps everything.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dynapar::report {

// At most a dozen lines, each ending in '\n'. Fields missing from `summary` are left out.
std::string human_summary(const nlohmann::json& summary, const std::string& out_dir);

}  // namespace dynapar::report
