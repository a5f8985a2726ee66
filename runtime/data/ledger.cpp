#include "data/ledger.hpp"

namespace dynapar::data {

void sample_ledger::applied(std::int64_t epoch, const std::vector<int>& samples) {
  auto& c = count_[epoch];
  c.resize(n_, 0);
  for (int i : samples) ++c[i];
}

}  // namespace dynapar::data
