#include "data/read_ahead.hpp"

#include <algorithm>
#include <chrono>
#include <system_error>

namespace dynapar::data {

read_ahead::read_ahead(std::shared_ptr<const sample_store> inner, std::size_t values_each, int threads, std::size_t capacity)
    : inner_(std::move(inner)), each_(values_each), capacity_(capacity) {
  for (int k = 0; k < threads; ++k) {
    try {
      pool_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {  // no thread to be had: fewer make them, or values() does
      break;
    }
  }
}

read_ahead::~read_ahead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  for (auto& t : pool_) t.join();
}

void read_ahead::ahead(const std::vector<int>& ids, std::int64_t step) const {
  if (pool_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Samples of steps before the one before not taken: the plan changed, or a step was retried
    // (its reads decode again); those being made are left to their thread, and let go at the
    // next ask. The step before's stay: the hint for a step goes out as the one before starts,
    // whose later slices (a probe's rest) are still to read theirs.
    const auto stale = std::stable_partition(todo_.begin(), todo_.end(), [&](const key& k) { return k.first >= step - 1; });
    for (auto k = stale; k != todo_.end(); ++k) made_.erase(*k);
    todo_.erase(stale, todo_.end());
    for (auto it = made_.begin(); it != made_.end();)
      it = it->first.first < step - 1 && it->second.ready ? made_.erase(it) : std::next(it);
    for (const int i : ids) {
      if (made_.size() >= capacity_) break;
      if (i < 0 || i >= inner_->size() || !made_.emplace(key{step, i}, made{}).second) continue;
      todo_.push_back({step, i});
    }
  }
  changed_.notify_all();
}

void read_ahead::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !todo_.empty(); });
    if (stop_) return;
    const key k = todo_.front();
    todo_.pop_front();
    lock.unlock();
    made m;
    m.ready = true;
    try {
      m.values.resize(each_);
      inner_->values(k.second, k.first, m.values.data());
    } catch (...) {  // taken by the read that asks for it, as if it had decoded it
      m.error = std::current_exception();
    }
    lock.lock();
    if (auto it = made_.find(k); it != made_.end()) it->second = std::move(m);
    changed_.notify_all();
  }
}

void read_ahead::values(int i, std::int64_t step, float* out) const {
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(clock::now() - started).count(); };
  made m;
  {
    // Asked for: wait until it is made (or let go by a later ahead(), then decoded here).
    std::unique_lock<std::mutex> lock(mu_);
    decltype(made_)::iterator it;
    changed_.wait(lock, [&] {
      it = made_.find({step, i});
      return it == made_.end() || it->second.ready;
    });
    if (it != made_.end()) {
      m = std::move(it->second);
      made_.erase(it);
      ++figures_.ahead;
      figures_.waited_s += waited();
    }
  }
  if (!m.ready) {  // decoded here, counted whether it decodes or throws
    const auto count = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      ++figures_.when_read, figures_.waited_s += waited();
    };
    try {
      inner_->values(i, step, out);
    } catch (...) {
      count();
      throw;
    }
    count();
    return;
  }
  if (m.error) std::rethrow_exception(m.error);
  std::copy(m.values.begin(), m.values.end(), out);
}

std::int64_t read_ahead::samples_read() const {
  std::lock_guard<std::mutex> lock(mu_);
  return figures_.ahead + figures_.when_read;
}

sample_store::read_figures read_ahead::read_ahead_figures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return figures_;
}

}  // namespace dynapar::data
