// Data of kind torch (docs/FORMATS.md, "Data"): tensors a user saved with torch.save, read
// with LibTorch's own loader (torch::pickle_load). Here, not in the data library, because only
// LibTorch reads them; model::load_data sends every other kind there.
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/files.hpp"
#include "data/hash.hpp"
#include "model/api.hpp"

namespace dynapar::model {
namespace {

// The pair a file holds: (inputs, labels) as a tuple or a list, or {"inputs", "labels"}.
result<std::pair<torch::Tensor, torch::Tensor>> read_pair(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return make_error("bad_data", file + ": cannot be read");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue v;
  try {
    v = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    return make_error("bad_data", file + ": not a file torch.save wrote, or truncated (" + why.substr(0, 200) + ")");
  }
  const auto want = make_error("bad_data", file + ": must hold (inputs, labels), two tensors as a tuple or a list, or a dict with 'inputs' and 'labels'");
  std::vector<c10::IValue> two;
  if (v.isTuple()) two = v.toTupleRef().elements().vec();
  else if (v.isList()) two = v.toListRef().vec();
  else if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    for (const char* k : {"inputs", "labels"}) {
      const auto it = d.find(c10::IValue(std::string(k)));
      if (it == d.end()) return want;
      two.push_back(it->value());
    }
  }
  if (two.size() != 2 || !two[0].isTensor() || !two[1].isTensor()) return want;
  return std::pair{two[0].toTensor(), two[1].toTensor()};
}

class torch_samples final : public data::sample_store {
 public:
  // x: [count, row] float32, normalised; y: [count] int64, or [count, k] float32 (regression).
  torch_samples(torch::Tensor x, torch::Tensor y, std::uint64_t fp) : x_(std::move(x)), y_(std::move(y)), fp_(fp) {}
  int size() const override { return static_cast<int>(x_.size(0)); }
  void values(int i, std::int64_t, float* out) const override {
    ++reads_;
    std::memcpy(out, x_[i].data_ptr<float>(), static_cast<std::size_t>(x_.size(1)) * sizeof(float));
  }
  std::int64_t label(int i) const override { return y_.is_floating_point() ? 0 : y_[i].item<std::int64_t>(); }
  void target_values(int i, float* out) const override {
    std::memcpy(out, y_[i].data_ptr<float>(), static_cast<std::size_t>(y_.size(1)) * sizeof(float));
  }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_; }

 private:
  torch::Tensor x_, y_;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

result<data::dataset> load_torch(const data::source& s, bool train) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool own = !train && fs::exists(s.path + "/val.pt", ec);
  const std::string file = s.path + (own ? "/val.pt" : "/train.pt");
  auto pair = read_pair(file);
  if (!pair) return pair.err();
  auto [x, y] = std::move(*pair);
  const auto n = x.dim() > 0 ? x.size(0) : 0;
  if (x.dim() < 2 || x.dim() > 4)
    return make_error("bad_data", file + ": inputs must be [n, channels, rows, cols], [n, rows, cols] or [n, features], not " + std::to_string(x.dim()) + "-D");
  if (x.is_complex() || x.scalar_type() == torch::kBool) return make_error("bad_data", file + ": inputs must be real numbers, not " + std::string(c10::toString(x.scalar_type())));
  if (y.is_floating_point() && !s.regression)
    return make_error("bad_data", file + ": labels must be integers (class ids), not " + std::string(c10::toString(y.scalar_type())) + " (real values to regress: loss mse)");
  if (s.regression ? (y.dim() < 1 || y.dim() > 2 || y.size(0) != n) : (y.dim() != 1 || y.size(0) != n))
    return make_error("bad_data", file + ": labels must be one per input ([" + std::to_string(n) + "]" + (s.regression ? " or [n, k] values to regress" : "") + ")");
  if (n < 2 || n > INT32_MAX) return make_error("bad_data", file + ": " + std::to_string(n) + " samples; 2 .. 2^31 - 1 are needed");
  for (int k = 1; k < x.dim(); ++k)
    if (x.size(k) < 1 || x.size(k) > (1 << 16)) return make_error("bad_data", file + ": a sample's sizes must be in 1..65536");
  const auto [first, count] = data::split(n, own, train, s.val_share);
  x = x.slice(0, first, first + count).to(torch::kFloat64).contiguous();
  y = y.slice(0, first, first + count).contiguous();
  data::dataset d;
  d.channels = x.dim() == 4 ? static_cast<int>(x.size(1)) : 1;
  d.rows = x.dim() == 4 ? static_cast<int>(x.size(2)) : x.dim() == 3 ? static_cast<int>(x.size(1)) : 1;
  d.cols = static_cast<int>(x.size(-1));
  if (auto st = data::check_channels(s, d.channels, file + ": the inputs' channels (dimension 1 of [n, channels, rows, cols])"); !st) return st.err();
  const auto bad = torch::isfinite(x).logical_not().flatten(1).any(1).nonzero();
  if (bad.numel() > 0) return make_error("bad_data", file + ": sample " + std::to_string(first + bad[0].item<std::int64_t>()) + " holds a value that is not finite");
  if (s.regression) {
    y = (y.dim() == 1 ? y.unsqueeze(1) : y).to(torch::kFloat32).contiguous();
    const auto nonfinite = torch::isfinite(y).logical_not().any(1).nonzero();
    if (nonfinite.numel() > 0)
      return make_error("bad_data", file + ": sample " + std::to_string(first + nonfinite[0].item<std::int64_t>()) + " has a value to regress that is not finite");
    d.target_values = static_cast<int>(y.size(1));
    d.classes = d.target_values;
  } else {
    y = y.to(torch::kInt64);
    const auto out = (y < 0).logical_or(s.classes > 0 ? y >= s.classes : torch::zeros_like(y, torch::kBool)).nonzero();
    if (out.numel() > 0) {
      const auto i = out[0].item<std::int64_t>();
      return make_error("bad_data", file + ": sample " + std::to_string(first + i) + " has label " + std::to_string(y[i].item<std::int64_t>()) +
                                        (s.classes > 0 ? ", outside 0.." + std::to_string(s.classes - 1) : ", below 0"));
    }
    d.classes = s.classes > 0 ? s.classes : static_cast<int>(y.max().item<std::int64_t>() + 1);
  }
  // Fed as (x - mean[c]) / std[c], channel by channel.
  const auto plane = x[0].numel() / d.channels;
  auto by_channel = x.reshape({count, d.channels, plane});
  for (int c = 0; c < d.channels; ++c) by_channel.select(1, c).sub_(data::mean_of(s, c)).div_(data::std_of(s, c));
  x = by_channel.reshape({count, -1}).to(torch::kFloat32).contiguous();
  data::hasher h;
  for (const auto v : {std::uint64_t(x.size(1)), std::uint64_t(d.channels), std::uint64_t(d.rows), std::uint64_t(first), std::uint64_t(count),
                       std::uint64_t(s.regression)})
    h.add(v);
  h.add(static_cast<const std::uint8_t*>(x.data_ptr()), static_cast<std::size_t>(x.nbytes()));
  h.add(static_cast<const std::uint8_t*>(y.data_ptr()), static_cast<std::size_t>(y.nbytes()));
  d.store = std::make_shared<torch_samples>(std::move(x), std::move(y), h.value());
  return d;
}

}  // namespace

result<data::dataset> load_data(const data::source& s, bool train) {
  if (s.kind != "torch") return data::load(s, train);
  if (auto st = data::check(s); !st) return st.err();
  return load_torch(s, train);
}

}  // namespace dynapar::model
