// Token buckets by key (a peer's routing id), and one shared by all keys: each key may send
// `burst` messages at once and `per_s` a second after that, and all keys together `total_burst`
// and `total_per_s`; what is over either is refused. Time is the caller's (seconds, any
// origin), so the limiter is pure. At most `max_keys` keys are tracked: past that the table is
// forgotten, and the shared bucket still bounds a flood of fresh identities.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

namespace dynapar {

struct rate_limit_config {
  double per_s = 20, burst = 40;               // one key
  double total_per_s = 200, total_burst = 400;  // every key together
  std::size_t max_keys = 4096;
};

class rate_limit {
 public:
  explicit rate_limit(rate_limit_config c = {}) : c_(c), total_{c.total_burst, 0} {}

  bool allow(const std::string& key, double now_s) {
    if (keys_.size() >= c_.max_keys && !keys_.count(key)) keys_.clear();
    auto& mine = keys_.try_emplace(key, bucket{c_.burst, now_s}).first->second;
    refill(mine, c_.per_s, c_.burst, now_s);
    refill(total_, c_.total_per_s, c_.total_burst, now_s);
    if (mine.tokens < 1 || total_.tokens < 1) {
      ++refused_;
      return false;
    }
    mine.tokens -= 1;
    total_.tokens -= 1;
    return true;
  }
  std::uint64_t refused() const { return refused_; }

 private:
  struct bucket {
    double tokens = 0, at = 0;
  };
  static void refill(bucket& b, double per_s, double cap, double now_s) {
    if (now_s > b.at) b.tokens = std::min(cap, b.tokens + (now_s - b.at) * per_s);
    b.at = std::max(b.at, now_s);
  }
  rate_limit_config c_;
  bucket total_;
  std::map<std::string, bucket> keys_;
  std::uint64_t refused_ = 0;
};

}  // namespace dynapar
