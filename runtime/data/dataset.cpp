#include "data/dataset.hpp"

#include <algorithm>

#include "common/rng.hpp"
#include "data/idx.hpp"

namespace dynapar::data {

result<dataset> load_fashion_mnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "t10k") return make_error("bad_data", "split must be 'train' or 't10k'");
  auto images = read_idx_gz(dir + "/" + split + "-images-idx3-ubyte.gz");
  if (!images) return images.err();
  auto labels = read_idx_gz(dir + "/" + split + "-labels-idx1-ubyte.gz");
  if (!labels) return labels.err();
  if (images->dims.size() != 3 || labels->dims.size() != 1 || images->dims[0] != labels->dims[0])
    return make_error("bad_data", dir + ": images and labels of '" + split + "' do not match");
  dataset d;
  d.rows = static_cast<int>(images->dims[1]);
  d.cols = static_cast<int>(images->dims[2]);
  d.images = std::move(images->values);
  d.labels = std::move(labels->values);
  for (auto l : d.labels)
    if (l >= d.classes) return make_error("bad_data", dir + ": label " + std::to_string(l) + " out of range");
  return d;
}

dataset synthetic(int n, std::uint64_t seed) {
  rng r(seed);
  dataset d;
  const int px = d.rows * d.cols;
  std::vector<std::uint8_t> proto(static_cast<std::size_t>(d.classes) * px);
  for (auto& p : proto) p = static_cast<std::uint8_t>(r.below(256));
  d.images.resize(static_cast<std::size_t>(n) * px);
  d.labels.resize(n);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(r.below(d.classes));
    d.labels[i] = static_cast<std::uint8_t>(c);
    for (int k = 0; k < px; ++k) {
      const double v = proto[static_cast<std::size_t>(c) * px + k] + r.normal(0, 40);
      d.images[static_cast<std::size_t>(i) * px + k] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
    }
  }
  return d;
}

}  // namespace dynapar::data
