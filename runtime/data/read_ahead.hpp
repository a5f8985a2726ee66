// Samples decoded before a batch asks for them (issue 74: a step does not wait on its data).
// ahead(ids, step) hands the next step's samples to a small pool of threads; a later values()
// of the same sample and step takes what they made instead of decoding, waits for one still
// being made, and decodes as before one never asked for. What a sample decodes to does not
// depend on when or where: the same values as without it, the same error (thrown by the
// values() that takes it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "data/dataset.hpp"

namespace dynapar::data {

class read_ahead final : public sample_store {
 public:
  // Over `inner` (a store that decodes), `values_each` values a sample, on `threads` threads,
  // holding at most `capacity` samples made and not yet taken (asked beyond it: left to values()).
  read_ahead(std::shared_ptr<const sample_store> inner, std::size_t values_each, int threads = 2, std::size_t capacity = 1024);
  ~read_ahead() override;
  read_ahead(const read_ahead&) = delete;
  read_ahead& operator=(const read_ahead&) = delete;

  // Decode `ids` for training step `step` (< 0: evaluation) ahead of their reads; what was made
  // for a step before `step - 1` and not taken is let go (a plan that changed took others).
  void ahead(const std::vector<int>& ids, std::int64_t step) const override;

  int size() const override { return inner_->size(); }
  void values(int i, std::int64_t step, float* out) const override;
  std::int64_t label(int i) const override { return inner_->label(i); }
  void target_values(int i, float* out) const override { inner_->target_values(i, out); }
  void target_ids(int i, std::int64_t* out) const override { inner_->target_ids(i, out); }
  std::uint64_t fingerprint() const override { return inner_->fingerprint(); }
  // What values() gave (its callers needed), not what was decoded: a guess not taken is not a read.
  std::int64_t samples_read() const override;
  bool decodes() const override { return inner_->decodes(); }
  read_figures read_ahead_figures() const override;

 private:
  using key = std::pair<std::int64_t, int>;  // step, sample
  struct made {
    bool ready = false;
    std::vector<float> values;
    std::exception_ptr error;
  };
  void work();
  std::shared_ptr<const sample_store> inner_;
  std::size_t each_, capacity_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  mutable std::map<key, made> made_;  // asked: being made, or made and not yet taken
  mutable std::deque<key> todo_;
  mutable read_figures figures_;
  bool stop_ = false;
  std::vector<std::thread> pool_;
};

}  // namespace dynapar::data
