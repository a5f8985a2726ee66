#include "data/files.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

#include "data/hash.hpp"
#include "data/identity.hpp"
#include "data/npy.hpp"
#include "data/shards.hpp"

namespace dynapar::data {

namespace {


class npy_samples final : public sample_store {
 public:
  // Channel c's values are fed as (x - mean[c]) / sd[c]: one entry a channel, each channel
  // row_elements / channels values long.
  npy_samples(npy_array x, npy_array y, std::int64_t first, std::int64_t count, std::vector<double> mean, std::vector<double> sd,
              std::uint64_t fp)
      : x_(std::move(x)), y_(std::move(y)), first_(first), count_(count), mean_(std::move(mean)), sd_(std::move(sd)), fp_(fp) {
    identity_ = std::all_of(mean_.begin(), mean_.end(), [](double m) { return m == 0; }) &&
                std::all_of(sd_.begin(), sd_.end(), [](double v) { return v == 1; });
  }
  int size() const override { return static_cast<int>(count_); }
  void values(int i, std::int64_t, float* out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t n = x_.row_elements(), bytes = n * item_bytes(x_.type);
    const std::size_t at = x_.data_offset + static_cast<std::size_t>(first_ + i) * bytes;
    if (x_.type == dtype::f32 && identity_) {
      if (!x_.file->read(at, bytes, out)) fail(i);
      return;
    }
    thread_local std::vector<std::uint8_t> row;
    row.resize(bytes);
    if (!x_.file->read(at, bytes, row.data())) fail(i);
    const std::size_t plane = n / mean_.size();
    for (std::size_t c = 0, k = 0; c < mean_.size(); ++c)
      for (std::size_t e = 0; e < plane; ++e, ++k) out[k] = static_cast<float>((element(x_.type, row.data(), k) - mean_[c]) / sd_[c]);
  }
  std::int64_t label(int i) const override { return static_cast<std::int64_t>(element(y_.type, y_.row(first_ + i), 0)); }
  void target_values(int i, float* out) const override {
    const auto* row = y_.row(first_ + i);
    for (std::size_t k = 0, n = y_.row_elements(); k < n; ++k) out[k] = static_cast<float>(element(y_.type, row, k));
  }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_.load(); }

 private:
  [[noreturn]] void fail(int i) const {
    throw std::runtime_error(x_.file->path() + ": sample " + std::to_string(first_ + i) + " cannot be read (the file shrank or failed since it was checked)");
  }
  npy_array x_, y_;
  std::int64_t first_, count_;
  std::vector<double> mean_, sd_;  // by channel
  bool identity_ = false;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

class token_samples final : public sample_store {
 public:
  token_samples(std::shared_ptr<const mapped_file> f, dtype t, std::size_t first, std::size_t n, int window, int stride, std::uint64_t fp)
      : f_(std::move(f)), t_(t), first_(first), n_(n), window_(window), stride_(stride), fp_(fp) {}
  int size() const override {
    return n_ <= static_cast<std::size_t>(window_) ? 0 : static_cast<int>((n_ - window_ - 1) / stride_ + 1);
  }
  void values(int i, std::int64_t, float* out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    thread_local std::vector<std::uint8_t> ids;
    ids.resize(static_cast<std::size_t>(window_) * item_bytes(t_));
    read(first_ + static_cast<std::size_t>(i) * stride_, window_, ids.data());
    for (int k = 0; k < window_; ++k) out[k] = static_cast<float>(element(t_, ids.data(), k));
  }
  std::int64_t label(int i) const override {  // the one id after the window, not the window again
    std::uint8_t id[4];
    read(first_ + static_cast<std::size_t>(i) * stride_ + window_, 1, id);
    return static_cast<std::int64_t>(element(t_, id, 0));
  }
  void target_ids(int i, std::int64_t* out) const override {  // the window shifted by one
    thread_local std::vector<std::uint8_t> ids;
    ids.resize(static_cast<std::size_t>(window_) * item_bytes(t_));
    read(first_ + static_cast<std::size_t>(i) * stride_ + 1, window_, ids.data());
    for (int k = 0; k < window_; ++k) out[k] = static_cast<std::int64_t>(element(t_, ids.data(), k));
  }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_.load(); }

 private:
  // `n` ids from id `at`, read from the file.
  void read(std::size_t at, int n, std::uint8_t* out) const {
    const std::size_t item = item_bytes(t_);
    if (!f_->read(at * item, static_cast<std::size_t>(n) * item, out))
      throw std::runtime_error(f_->path() + ": ids from " + std::to_string(at) + " cannot be read (the file shrank or failed since it was checked)");
  }
  std::shared_ptr<const mapped_file> f_;
  dtype t_;
  std::size_t first_, n_;
  int window_, stride_;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

bool exists(const std::string& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

}  // namespace

result<std::uint64_t> indexed_pass(const mapped_file& f, std::size_t lo, std::size_t hi, identity_index& index, const std::string& what,
                                   const std::function<status(std::size_t, std::size_t)>& check) {
  const std::string key = what + " " + std::to_string(lo) + " " + std::to_string(hi);
  if (const auto d = index.find(f.path(), key)) return *d;
  auto was = stamp_of(f.path());  // before reading: a change meanwhile is read again next time
  hasher h;
  constexpr std::size_t chunk = 16u << 20;
  for (std::size_t at = lo; at < hi; at += chunk) {
    const std::size_t n = std::min(chunk, hi - at);
    h.add(f.bytes() + at, n);
    if (auto st = check(at, at + n); !st) return st.err();
    f.release(at, n);
  }
  if (was) {
    was->digest = h.value();
    index.put(f.path(), key, *was);
  }
  return h.value();
}

std::pair<std::int64_t, std::int64_t> split(std::int64_t n, bool own_file, bool train, double val_share) {
  if (own_file) return {0, n};
  const auto val = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(static_cast<double>(n) * val_share)));
  return train ? std::pair{std::int64_t{0}, n - val} : std::pair{n - val, val};
}


result<dataset> load_npy(const source& s, bool train) {
  std::error_code ec;
  if (!exists(s.path + "/train_inputs.npy") && std::filesystem::is_directory(s.path + "/train", ec)) return load_npy_shards(s, train);
  const bool own = !train && exists(s.path + "/val_inputs.npy");
  const std::string stem = s.path + (train || !own ? "/train_" : "/val_");
  if (!own && !train && exists(s.path + "/val_labels.npy")) return make_error("bad_data", s.path + ": val_labels.npy without val_inputs.npy");
  auto x = open_npy(stem + "inputs.npy");
  if (!x) return x.err();
  auto y = open_npy(stem + "labels.npy");
  if (!y) return y.err();
  return arrays_dataset(std::move(*x), std::move(*y), stem + "inputs.npy", stem + "labels.npy", own, train, s);
}

result<dataset> arrays_dataset(npy_array x_in, npy_array y_in, const std::string& xf, const std::string& yf, bool own, bool train,
                               const source& s, identity_index* index) {
  const auto* x = &x_in;
  const auto* y = &y_in;
  const auto n = x->rows();
  if (x->shape.size() < 2 || x->shape.size() > 4)
    return make_error("bad_data", xf + ": inputs must be [n, channels, rows, cols], [n, rows, cols] or [n, features], not " + std::to_string(x->shape.size()) + "-D");
  if (is_float(y->type) && !s.regression)
    return make_error("bad_data", yf + ": labels must be integers (class ids), not " + dtype_name(y->type) + " (real values to regress: loss mse)");
  if (s.regression ? (y->shape.size() < 1 || y->shape.size() > 2 || y->rows() != n) : (y->shape.size() != 1 || y->rows() != n))
    return make_error("bad_data", yf + ": labels must be one per input ([" + std::to_string(n) + "]" + (s.regression ? " or [n, k] values to regress" : "") +
                                      "), not of shape with " + std::to_string(y->shape.size()) + " axes and " + std::to_string(y->rows()) + " rows");
  if (s.regression && (y->row_elements() < 1 || y->row_elements() > (1 << 16)))
    return make_error("bad_data", yf + ": a sample's values to regress must number 1..65536");
  if (n < (own ? 1 : 2)) return make_error("bad_data", xf + (own ? ": no samples" : ": fewer than 2 samples"));
  if (n > INT32_MAX) return make_error("bad_data", xf + ": more than 2^31 - 1 samples");
  for (std::size_t k = 1; k < x->shape.size(); ++k)
    if (x->shape[k] < 1 || x->shape[k] > (1 << 16)) return make_error("bad_data", xf + ": a sample's sizes must be in 1..65536");
  const auto [first, count] = split(n, own, train, s.val_share);
  dataset d;
  const auto& sh = x->shape;
  d.channels = sh.size() == 4 ? static_cast<int>(sh[1]) : 1;
  d.rows = sh.size() == 4 ? static_cast<int>(sh[2]) : sh.size() == 3 ? static_cast<int>(sh[1]) : 1;
  d.cols = static_cast<int>(sh.back());
  // Labels: small, read whole; the largest sets the classes unless the job gives them. A
  // regression's values need only be finite.
  std::int64_t top = 0;
  if (s.regression) {
    d.target_values = static_cast<int>(y->row_elements());
    for (std::int64_t i = first; i < first + count; ++i)
      for (std::size_t k = 0; k < y->row_elements(); ++k)
        if (!std::isfinite(element(y->type, y->row(i), k)))
          return make_error("bad_data", yf + ": sample " + std::to_string(i) + " has a value to regress that is not finite");
  }
  for (std::int64_t i = first; i < first + count && !s.regression; ++i) {
    const double l = element(y->type, y->row(i), 0);
    if (l < 0 || (s.classes > 0 && l >= s.classes))
      return make_error("bad_data", yf + ": sample " + std::to_string(i) + " has label " + std::to_string(static_cast<long long>(l)) +
                                        (s.classes > 0 ? ", outside 0.." + std::to_string(s.classes - 1) : ", below 0"));
    top = std::max(top, static_cast<std::int64_t>(l));
  }
  d.classes = s.regression ? d.target_values : s.classes > 0 ? s.classes : static_cast<int>(top + 1);
  if (auto st = check_channels(s, d.channels, xf + ": the inputs' channels (dimension 1 of [n, channels, rows, cols])"); !st) return st.err();
  // Inputs: finite, hashed with the shape and labels.
  hasher h;
  for (auto v : sh) h.add(static_cast<std::uint64_t>(v));
  h.add(static_cast<std::uint64_t>(x->type));
  h.add(static_cast<std::uint64_t>(first));
  h.add(static_cast<std::uint64_t>(count));
  h.add(static_cast<std::uint64_t>(s.regression));
  h.add(y->row(first), static_cast<std::size_t>(count) * y->row_elements() * item_bytes(y->type));
  const std::size_t row_bytes = x->row_elements() * item_bytes(x->type);
  const std::size_t lo = x->data_offset + static_cast<std::size_t>(first) * row_bytes, hi = lo + static_cast<std::size_t>(count) * row_bytes;
  const auto t = x->type;
  auto finite = [&](std::size_t a, std::size_t b) -> status {
    if (!is_float(t)) return ok_status();
    const std::size_t step = item_bytes(t);
    for (std::size_t at = a; at < b; at += step)
      if (!std::isfinite(element(t, x->file->bytes() + at, 0)))
        return make_error("bad_data", xf + ": sample " + std::to_string((at - x->data_offset) / row_bytes) + " holds a value that is not finite");
    return ok_status();
  };
  std::optional<identity_index> mine;  // without the caller's: this file's own, read and saved here
  if (!index) index = &mine.emplace(identity_index::open(s.path));
  const auto digest = indexed_pass(*x->file, lo, hi, *index, is_float(t) ? "finite" : "bytes", finite);
  if (mine) mine->save();
  if (!digest) return digest.err();
  h.add(*digest);
  for (const auto* v : {&s.mean, &s.std_dev})
    for (const double m : *v) h.add(static_cast<std::uint64_t>(std::llround(m * 1e9)));
  std::vector<double> mean, sd;
  for (int c = 0; c < d.channels; ++c) mean.push_back(mean_of(s, c)), sd.push_back(std_of(s, c));
  d.store = std::make_shared<npy_samples>(std::move(x_in), std::move(y_in), first, count, std::move(mean), std::move(sd), h.value());
  return d;
}

result<dataset> load_tokens(const source& s, bool train) {
  auto t = parse_dtype(s.token_type);
  if (!t) return t.err();
  const int stride = s.stride > 0 ? s.stride : s.window;
  const bool own = !train && exists(s.path + "/val.bin");
  const std::string file = s.path + (own ? "/val.bin" : "/train.bin");
  auto f = mapped_file::open(file);
  if (!f) return f.err();
  const std::size_t item = item_bytes(*t);
  if ((*f)->size() % item != 0)
    return make_error("bad_data", file + ": " + std::to_string((*f)->size()) + " bytes is not a whole number of " + s.token_type + " ids (truncated, or another token_type)");
  const auto total = static_cast<std::int64_t>((*f)->size() / item);
  if (total / std::max(1, stride) > INT32_MAX) return make_error("bad_data", file + ": more than 2^31 - 1 windows");
  const auto [first, count] = split(total, own, train, s.val_share);
  if (count <= s.window) return make_error("bad_data", file + ": " + std::to_string(count) + " ids are too few for one window of " + std::to_string(s.window) + " and its label");
  hasher h;
  for (std::uint64_t v : {std::uint64_t(*t), std::uint64_t(first), std::uint64_t(count), std::uint64_t(s.window), std::uint64_t(stride), std::uint64_t(s.vocab),
                          std::uint64_t(s.next_token)})
    h.add(v);
  const auto& m = **f;
  auto in_range = [&](std::size_t a, std::size_t b) -> status {
    for (std::size_t at = a; at < b; at += item) {
      const double id = element(*t, m.bytes() + at, 0);
      if (id >= s.vocab)
        return make_error("bad_data", file + ": id " + std::to_string(static_cast<long long>(id)) + " at position " + std::to_string(at / item) +
                                          " is not below vocab " + std::to_string(s.vocab));
    }
    return ok_status();
  };
  auto index = identity_index::open(s.path);
  const auto digest = indexed_pass(m, static_cast<std::size_t>(first) * item, static_cast<std::size_t>(first + count) * item, index,
                           "below " + std::to_string(s.vocab), in_range);
  index.save();
  if (!digest) return digest.err();
  h.add(*digest);
  dataset d;
  d.channels = 1, d.rows = 1, d.cols = s.window, d.classes = s.vocab, d.tokens = true;
  d.target_ids = s.next_token ? s.window : 0;
  d.store = std::make_shared<token_samples>(*f, *t, static_cast<std::size_t>(first), static_cast<std::size_t>(count), s.window, stride, h.value());
  return d;
}

}  // namespace dynapar::data
