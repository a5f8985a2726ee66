#include "data/text.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace dynapar::data {

result<dataset> load_text(const std::string& dir, const std::string& split, const text_options& o) {
  namespace fs = std::filesystem;
  if (split != "train" && split != "test") return make_error("bad_data", "split must be 'train' or 'test'");
  if (o.window < 1 || o.stride < 1 || !(o.test_share > 0 && o.test_share < 1))
    return make_error("bad_data", "text windows need window >= 1, stride >= 1 and a test share in (0, 1)");
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && !e.is_symlink() && !e.path().has_extension()) files.push_back(e.path());
  if (ec) return make_error("io", dir + ": " + ec.message() + " (install Debian's fortunes package)");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return make_error("io", f.string() + ": cannot be read");
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto n = static_cast<std::int64_t>(text.size());
  const auto cut = static_cast<std::int64_t>(static_cast<double>(n) * (1 - o.test_share));
  const bool train = split == "train";
  const std::int64_t lo = train ? 0 : cut, hi = train ? cut : n;
  const int step = train ? o.stride : o.window;
  dataset d;
  d.rows = 1;
  d.cols = o.window;
  d.classes = 128;
  d.tokens = true;
  auto token = [&](std::int64_t i) { return static_cast<std::uint8_t>(std::min(127, static_cast<int>(static_cast<unsigned char>(text[i])))); };
  // A window and its label both lie inside the split.
  for (std::int64_t s = lo; s + o.window < hi; s += step) {
    for (int k = 0; k < o.window; ++k) d.images.push_back(token(s + k));
    d.labels.push_back(token(s + o.window));
  }
  if (d.labels.empty()) return make_error("bad_data", dir + ": too little text for one window of " + std::to_string(o.window));
  return d;
}

}  // namespace dynapar::data
