#include "common/memory_peak.hpp"

#include <fstream>
#include <string>

namespace dynapar {

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:   123456 kB"
  return 0;
}

}  // namespace dynapar
