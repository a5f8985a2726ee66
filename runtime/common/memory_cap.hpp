// A process's cap on resident memory (DYNAPAR_MAX_RSS_MB, `dynapar --max-rss-mb`): what lets
// a run show on one machine that no process needs more than its share (issue 50). The kernel
// does not enforce a resident-set limit (RLIMIT_RSS is ignored) and an address-space limit
// would count LibTorch's reservations, so a thread reads the resident set and the process
// ends, as the kernel's out-of-memory killer would end it, once it is over: a node over its
// cap is a crashed node that the run recovers from.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "common/result.hpp"

namespace dynapar {

// The cap DYNAPAR_MAX_RSS_MB asks for, in MB: unset or empty, 0 (none); else a whole number
// from 1 to 10^7. Anything else is an error naming the variable.
result<double> rss_cap_from_env(const char* value);

// Reads `resident_mb` every `period`; the first reading over `cap_mb` calls `over` with it,
// once, and the watch stops. Stops when destroyed.
class rss_watch {
 public:
  struct options {
    double cap_mb = 0;
    std::chrono::milliseconds period{20};
    std::function<double()> resident_mb;     // default: this process's VmRSS
    std::function<void(double rss_mb)> over;
  };
  explicit rss_watch(options o);
  ~rss_watch();
  rss_watch(const rss_watch&) = delete;
  rss_watch& operator=(const rss_watch&) = delete;

 private:
  options o_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dynapar
