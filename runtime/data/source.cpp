#include "data/source.hpp"

#include <algorithm>

#include "data/text.hpp"

namespace dynapar::data {

result<dataset> load(const source& s, bool train) {
  if (s.kind == "synthetic") {
    if (s.synthetic_samples < 1) return make_error("bad_data", "synthetic data needs synthetic_samples >= 1");
    return train ? synthetic(s.synthetic_samples, s.seed) : synthetic(std::max(1000, s.synthetic_samples / 6), s.seed + 1);
  }
  if (s.kind == "fortunes") return load_text(fortunes_dir, train ? "train" : "test");
  if (s.kind == "fashion_mnist") return load_fashion_mnist(fashion_mnist_dir, train ? "train" : "t10k");
  return make_error("bad_data", "unknown data set '" + s.kind + "' (fashion_mnist, synthetic or fortunes)");
}

std::uint64_t fingerprint(const dataset& d) {
  std::uint64_t h = 1469598103934665603ull;
  auto add = [&h](std::uint64_t byte) {
    h ^= byte;
    h *= 1099511628211ull;
  };
  for (const std::uint64_t v : {std::uint64_t(d.rows), std::uint64_t(d.cols), std::uint64_t(d.classes), std::uint64_t(d.tokens),
                                std::uint64_t(d.images.size()), std::uint64_t(d.labels.size())})
    for (int i = 0; i < 8; ++i) add((v >> (8 * i)) & 0xff);
  for (auto b : d.images) add(b);
  for (auto b : d.labels) add(b);
  return h == 0 ? 1 : h;
}

}  // namespace dynapar::data
