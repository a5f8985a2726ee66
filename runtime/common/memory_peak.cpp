#include "common/memory_peak.hpp"

#include <fstream>
#include <string>

namespace dynapar {

namespace {

// "NAME:   123456 kB" in a /proc file, in MB; 0 when it is not there.
double proc_field_mb(const char* file, const std::string& name) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name, 0) == 0) return std::stod(line.substr(name.size())) / 1024.0;
  return 0;
}

}  // namespace

double peak_rss_mb() { return proc_field_mb("/proc/self/status", "VmHWM:"); }

double resident_mb() { return proc_field_mb("/proc/self/status", "VmRSS:"); }

double read_mb() {
  std::ifstream in("/proc/self/io");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("rchar:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  return 0;
}

double available_memory_mb() { return proc_field_mb("/proc/meminfo", "MemAvailable:"); }

}  // namespace dynapar
