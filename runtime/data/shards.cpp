#include "data/shards.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <string>
#include <system_error>
#include <tuple>

#include "data/files.hpp"
#include "data/hash.hpp"

namespace dynapar::data {

namespace {

class concat_samples final : public sample_store {
 public:
  concat_samples(std::vector<std::shared_ptr<const sample_store>> parts, std::int64_t first, std::int64_t count)
      : parts_(std::move(parts)), first_(first), count_(count) {
    hasher h;
    h.add(static_cast<std::uint64_t>(first)), h.add(static_cast<std::uint64_t>(count));
    starts_.push_back(0);
    for (const auto& p : parts_) {
      starts_.push_back(starts_.back() + p->size());
      h.add(p->fingerprint());
    }
    fp_ = h.value();
  }
  int size() const override { return static_cast<int>(count_); }
  void values(int i, std::int64_t step, float* out) const override {
    const auto [p, j] = at(i);
    parts_[p]->values(j, step, out);
  }
  std::int64_t label(int i) const override {
    const auto [p, j] = at(i);
    return parts_[p]->label(j);
  }
  void target_values(int i, float* out) const override {
    const auto [p, j] = at(i);
    parts_[p]->target_values(j, out);
  }
  void target_ids(int i, std::int64_t* out) const override {
    const auto [p, j] = at(i);
    parts_[p]->target_ids(j, out);
  }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override {
    std::int64_t n = 0;
    for (const auto& p : parts_) n += p->samples_read();
    return n;
  }
  bool decodes() const override { return !parts_.empty() && parts_.front()->decodes(); }

 private:
  std::pair<std::size_t, int> at(int i) const {
    const std::int64_t g = first_ + i;
    const auto k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), g) - starts_.begin() - 1);
    return {k, static_cast<int>(g - starts_[k])};
  }
  std::vector<std::shared_ptr<const sample_store>> parts_;
  std::vector<std::int64_t> starts_;  // store k's first sample in the whole
  std::int64_t first_, count_;
  std::uint64_t fp_ = 0;
};

bool ends_with(const std::string& s, const std::string& tail) { return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0; }

// The shards' stems in name order; an error names a labels file without its inputs.
result<std::vector<std::string>> stems_in(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> stems, labels;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (ends_with(name, "_inputs.npy")) stems.push_back(name.substr(0, name.size() - 11));
    if (ends_with(name, "_labels.npy")) labels.push_back(name.substr(0, name.size() - 11));
  }
  if (ec) return make_error("io", dir + ": cannot list it (" + ec.message() + ")");
  std::sort(stems.begin(), stems.end());
  for (const auto& l : labels)
    if (!std::binary_search(stems.begin(), stems.end(), l)) return make_error("bad_data", dir + "/" + l + "_labels.npy: no " + l + "_inputs.npy beside it");
  if (stems.empty()) return make_error("bad_data", dir + ": no shards in it (pairs STEM_inputs.npy and STEM_labels.npy)");
  return stems;
}

}  // namespace

std::shared_ptr<const sample_store> concatenated(std::vector<std::shared_ptr<const sample_store>> parts, std::int64_t first, std::int64_t count) {
  return std::make_shared<concat_samples>(std::move(parts), first, count);
}

result<dataset> load_npy_shards(const source& s, bool train) {
  std::error_code ec;
  const bool own = !train && std::filesystem::is_directory(s.path + "/val", ec);
  const std::string dir = s.path + (own ? "/val" : "/train");
  auto stems = stems_in(dir);
  if (!stems) return stems.err();
  dataset d;
  std::vector<std::shared_ptr<const sample_store>> parts;
  std::int64_t total = 0;
  std::string first_file;
  auto index = identity_index::open(s.path);  // one for every shard: read and written once
  const auto fail = [&](error e) {  // the digests made before a bad shard are kept for the next start
    index.save();
    return e;
  };
  for (const auto& stem : *stems) {
    const std::string xf = dir + "/" + stem + "_inputs.npy", yf = dir + "/" + stem + "_labels.npy";
    if (!std::filesystem::exists(yf, ec)) return fail(make_error("bad_data", xf + ": no " + stem + "_labels.npy beside it"));
    auto x = open_npy(xf);
    if (!x) return fail(x.err());
    auto y = open_npy(yf);
    if (!y) return fail(y.err());
    auto part = arrays_dataset(std::move(*x), std::move(*y), xf, yf, /*own=*/true, /*train=*/true, s, &index);  // the whole shard
    if (!part) return fail(part.err());
    if (parts.empty()) {
      d = *part, first_file = xf;
    } else if (std::tie(part->channels, part->rows, part->cols, part->target_values) != std::tie(d.channels, d.rows, d.cols, d.target_values)) {
      return fail(make_error("bad_data", xf + ": a sample is " + std::to_string(part->channels) + " x " + std::to_string(part->rows) + " x " +
                                        std::to_string(part->cols) + ", but " + first_file + "'s are " + std::to_string(d.channels) + " x " +
                                        std::to_string(d.rows) + " x " + std::to_string(d.cols) + " (every shard's samples share one shape)"));
    }
    d.classes = std::max(d.classes, part->classes);
    total += part->size();
    parts.push_back(part->store);
  }
  index.save();
  if (total > INT32_MAX) return make_error("bad_data", dir + ": more than 2^31 - 1 samples in its shards");
  if (!own && total < 2) return make_error("bad_data", dir + ": fewer than 2 samples in its shards");
  const auto [first, count] = split(total, own, train, s.val_share);
  d.store = concatenated(std::move(parts), first, count);
  return d;
}

}  // namespace dynapar::data
