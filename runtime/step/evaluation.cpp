#include "step/evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dynapar::step {

evaluation_deal::evaluation_deal(int samples, int chunk, const std::vector<double>& shares, int per_task)
    : samples_(samples), chunk_(std::max(1, chunk)), per_task_(std::max(1, per_task)), first_(shares.size()), end_(shares.size()) {
  const int chunks = (samples_ + chunk_ - 1) / chunk_;
  const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
  double so_far = 0;
  for (std::size_t g = 0, at = 0; g < shares.size(); ++g) {
    so_far += shares[g];
    first_[g] = static_cast<int>(at);
    end_[g] = g + 1 == shares.size() ? chunks : static_cast<int>(std::lround(chunks * so_far / std::max(1.0, total)));
    at = static_cast<std::size_t>(std::max(first_[g], end_[g]));
  }
  next_ = first_;
}

std::vector<std::vector<int>> evaluation_deal::next(std::size_t g) {
  std::vector<std::vector<int>> out;
  for (const int last = std::min(end_[g], next_[g] + per_task_); next_[g] < last; ++next_[g]) {
    const int k = next_[g];
    out.emplace_back(std::min(samples_, (k + 1) * chunk_) - k * chunk_);
    std::iota(out.back().begin(), out.back().end(), k * chunk_);
  }
  return out;
}

}  // namespace dynapar::step
