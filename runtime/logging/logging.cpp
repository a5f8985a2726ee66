#include "logging/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace dynapar::logging {

status setup(const std::optional<std::string>& flag_level, const std::optional<std::string>& env_level) {
  const std::string text = flag_level ? *flag_level : env_level ? *env_level : "info";
  const auto level = spdlog::level::from_str(text);
  // from_str maps anything unknown to "off"; only accept that when asked for.
  if (level == spdlog::level::off && text != "off")
    return make_error("bad_log_level", "log level must be one of trace, debug, info, warn, error, critical, off; got '" + text + "'");
  spdlog::set_level(level);
  spdlog::set_pattern("[%H:%M:%S.%e] [%n] [%^%l%$] %v");
  return ok_status();
}

std::shared_ptr<spdlog::logger> get(const std::string& component) {
  if (auto l = spdlog::get(component)) return l;
  auto l = spdlog::stderr_color_mt(component);
  l->set_level(spdlog::get_level());
  return l;
}

}  // namespace dynapar::logging
