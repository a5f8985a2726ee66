// One spdlog logger per component ("planner", "sim", "controller", ...), all writing to
// stderr so that stdout stays clean for --json. Set up once in main; thread-safe after.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "common/result.hpp"

namespace dynapar::logging {

// level: trace, debug, info, warn, error, critical, off. The flag wins over the environment
// value (DYNAPAR_LOG, read by the caller and passed in); default "info".
status setup(const std::optional<std::string>& flag_level, const std::optional<std::string>& env_level);

// The component's logger, created on first use with the configured level.
std::shared_ptr<spdlog::logger> get(const std::string& component);

}  // namespace dynapar::logging
