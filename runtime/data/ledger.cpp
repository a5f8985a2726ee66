#include "data/ledger.hpp"

namespace dynapar::data {

void sample_ledger::applied(std::int64_t epoch, const std::vector<int>& samples) {
  auto& c = count_[epoch];
  c.resize(n_, 0);
  for (int i : samples) ++c[i];
}

void sample_ledger::undo(std::int64_t epoch, const std::vector<int>& samples) {
  auto& c = count_[epoch];
  c.resize(n_, 0);
  for (int i : samples)
    if (c[i] > 0) --c[i];
}

}  // namespace dynapar::data
