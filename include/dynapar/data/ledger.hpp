// Which samples each epoch applied, so a run can prove every sample was used exactly once
// (also across retried steps). Pure; actor-confined.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace dynapar::data {

struct ledger_report {
  std::int64_t lost = 0;        // samples of completed steps never applied
  std::int64_t duplicated = 0;  // applications beyond the first
};

class sample_ledger {
 public:
  explicit sample_ledger(int dataset_size) : n_(dataset_size) {}
  // A step's samples were applied (its optimizer step happened).
  void applied(std::int64_t epoch, const std::vector<int>& samples);
  // A rollback discarded a step's effect (its samples count as not applied again).
  void undo(std::int64_t epoch, const std::vector<int>& samples);
  // Against what the sampler says steps [0, steps) should have used.
  template <class Sampler>
  ledger_report check(Sampler& s, std::int64_t steps) const;

 private:
  int n_;
  std::map<std::int64_t, std::vector<std::uint16_t>> count_;  // per epoch, per sample
};

template <class Sampler>
ledger_report sample_ledger::check(Sampler& s, std::int64_t steps) const {
  ledger_report r;
  std::map<std::int64_t, std::vector<std::uint16_t>> expect;
  for (std::int64_t t = 0; t < steps; ++t) {
    auto& e = expect[t / s.steps_per_epoch()];
    e.resize(n_, 0);
    for (int i : s.step_samples(t)) ++e[i];
  }
  for (const auto& [epoch, want] : expect) {
    auto it = count_.find(epoch);
    for (int i = 0; i < n_; ++i) {
      const int got = it == count_.end() ? 0 : it->second[i];
      if (got < want[i]) r.lost += want[i] - got;
      if (got > want[i]) r.duplicated += got - want[i];
    }
  }
  for (const auto& [epoch, got] : count_)
    if (!expect.count(epoch))
      for (auto c : got) r.duplicated += c;
  return r;
}

}  // namespace dynapar::data
