// Which holders confirmed applying an attempt's sums: the driver's ledger counts a step only
// once every holder of every layer confirmed it, and after a failure in the apply phase a
// survivor that did not confirm counts as lost (it may be a step behind). Pure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace dynapar::control {

class apply_confirmations {
 public:
  // A new attempt's apply phase: what came before no longer counts. A confirmation naming a
  // layer in `buckets` covers every layer listed there (the holders applied a bucket of
  // layers summed together); any other covers its layer alone.
  void begin(std::int64_t tag, std::map<int, std::vector<int>> buckets = {});
  // Device `device` applied attempt `tag`'s sum to `layer` (and the rest of its bucket).
  // False when it is another attempt's (stale) or repeats one already counted.
  bool confirm(int device, std::int64_t tag, int layer);
  // Holders (layer -> devices) still in the run (`in_run`) that have not confirmed.
  std::set<int> missing(const std::map<int, std::vector<int>>& holders, const std::function<bool(int)>& in_run) const;

 private:
  std::int64_t tag_ = -1;
  std::map<int, std::vector<int>> buckets_;
  std::map<int, std::set<int>> got_;  // layer -> devices
};

}  // namespace dynapar::control
