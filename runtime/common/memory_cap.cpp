#include "common/memory_cap.hpp"

#include <algorithm>
#include <string>

#include "common/memory_peak.hpp"

namespace dynapar {

result<double> rss_cap_from_env(const char* value) {
  if (!value || !*value) return 0.0;
  const std::string s = value;
  const bool digits = s.size() <= 8 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long mb = digits ? std::stol(s) : -1;
  if (mb < 1 || mb > 10'000'000)
    return make_error("bad_env", "DYNAPAR_MAX_RSS_MB (--max-rss-mb) must be a whole number of MB from 1 to 10000000, got '" + s + "'");
  return static_cast<double>(mb);
}

rss_watch::rss_watch(options o) : o_(std::move(o)) {
  if (!o_.resident_mb) o_.resident_mb = dynapar::resident_mb;
  thread_ = std::thread([this] {
    while (!stop_) {
      if (const double rss = o_.resident_mb(); rss > o_.cap_mb) {
        if (o_.over) o_.over(rss);
        return;
      }
      std::this_thread::sleep_for(o_.period);
    }
  });
}

rss_watch::~rss_watch() {
  stop_ = true;
  thread_.join();
}

}  // namespace dynapar
