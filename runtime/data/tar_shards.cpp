// Image shards in WebDataset's layout: tar files whose members KEY.png (or .jpg, .jpeg) and
// KEY.cls are one sample, read by offset without unpacking.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "data/catalogue.hpp"
#include "data/files.hpp"
#include "data/hash.hpp"
#include "data/identity.hpp"
#include "data/images.hpp"
#include "data/npy.hpp"
#include "data/shards.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

struct member {
  std::string name;
  std::size_t offset = 0, size = 0;  // its data in the tar file
};

// A header's number: octal digits (space or NUL ended), or GNU's base-256 form (sizes past 8 GiB).
std::optional<std::uint64_t> number(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  if (p[0] & 0x80) {
    v = p[0] & 0x7f;
    for (std::size_t i = 1; i < n; ++i) {
      if (v >> 55) return std::nullopt;
      v = v << 8 | p[i];
    }
    return v;
  }
  std::size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  const std::size_t digits = i;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + (p[i] - '0');
  }
  if (i == digits) return std::nullopt;
  for (; i < n; ++i)
    if (p[i] != ' ' && p[i] != 0) return std::nullopt;
  return v;
}

std::string field(const std::uint8_t* p, std::size_t n) {
  const auto* c = reinterpret_cast<const char*>(p);
  return std::string(c, strnlen(c, n));
}

// The path a pax extended header ("LENGTH path=VALUE\n" records) gives the next member, if any.
std::optional<std::string> pax_path(std::string_view records) {
  std::optional<std::string> path;
  while (!records.empty()) {
    std::size_t len = 0, i = 0;
    for (; i < records.size() && std::isdigit(static_cast<unsigned char>(records[i])) && len < records.size(); ++i) len = len * 10 + static_cast<std::size_t>(records[i] - '0');
    if (i == 0 || i >= records.size() || records[i] != ' ' || len <= i + 2 || len > records.size()) break;
    const auto kv = records.substr(i + 1, len - i - 2);  // without the newline
    if (kv.substr(0, 5) == "path=") path = std::string(kv.substr(5));
    records.remove_prefix(len);
  }
  return path;
}

// The regular files in a tar (POSIX ustar, with pax and GNU long names), in order. Errors
// name the file and the byte where its structure breaks.
result<std::vector<member>> members_of(const mapped_file& f) {
  std::vector<member> out;
  const std::uint8_t* b = f.bytes();
  const std::size_t n = f.size();
  std::optional<std::string> next_name;  // from a pax or GNU header before it
  auto bad = [&](std::size_t at, const std::string& why) {
    return make_error("bad_data", f.path() + ": at byte " + std::to_string(at) + ": " + why + " (not a tar file, or damaged)");
  };
  for (std::size_t at = 0;;) {
    if (n - at < 512) return bad(at, "it ends inside a header, or without the end-of-archive blocks (truncated)");
    const std::uint8_t* h = b + at;
    if (std::all_of(h, h + 512, [](std::uint8_t c) { return c == 0; })) break;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    const auto want = number(h + 148, 8);
    if (!want || *want != sum) return bad(at, "the header's checksum does not match it");
    const auto size = number(h + 124, 12);
    if (!size) return bad(at, "the header's size is not a number");
    const std::size_t data = at + 512;
    if (*size > n - data) return bad(at, "a member of " + std::to_string(*size) + " bytes runs past the file's end (truncated)");
    const char type = static_cast<char>(h[156]);
    std::string name = field(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != 0) name = field(h + 345, 155) + "/" + name;
    if (type == 'L') {
      next_name = field(b + data, static_cast<std::size_t>(*size));
    } else if (type == 'x') {
      if (auto p = pax_path(std::string_view(reinterpret_cast<const char*>(b + data), static_cast<std::size_t>(*size)))) next_name = std::move(*p);
    } else if (type != 'g' && type != 'K') {  // 'g': pax globals, 'K': a GNU long link name
      if (type == '0' || type == '\0' || type == '7') out.push_back({next_name ? *next_name : name, data, static_cast<std::size_t>(*size)});
      next_name.reset();
    }
    at = data + static_cast<std::size_t>((*size + 511) / 512 * 512);
    if (at > n) return bad(data, "a member's padding runs past the file's end (truncated)");
  }
  return out;
}

// WebDataset's grouping: a member's key is its path up to the first dot of its file name, its
// extension the rest; consecutive members with one key are one sample.
std::pair<std::string_view, std::string> key_ext(std::string_view name) {
  const auto slash = name.rfind('/');
  const auto dot = name.find('.', slash == std::string_view::npos ? 0 : slash + 1);
  if (dot == std::string_view::npos) return {name, ""};
  std::string ext(name.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return {name.substr(0, dot), ext};
}

// Shard `shard`'s samples appended to `out` (their image members' names to `names`): each key's
// image and class id (.cls: decimal text).
status samples_of(const mapped_file& f, std::uint32_t shard, std::vector<listed_sample>& out, std::string& names) {
  auto ms = members_of(f);
  if (!ms) return ms.err();
  for (std::size_t i = 0; i < ms->size();) {
    const auto key = key_ext((*ms)[i].name).first;
    const member* image = nullptr;
    std::optional<long long> label;
    std::size_t j = i;
    for (; j < ms->size() && key_ext((*ms)[j].name).first == key; ++j) {
      const auto& m = (*ms)[j];
      const auto ext = key_ext(m.name).second;
      if (ext == "png" || ext == "jpg" || ext == "jpeg") {
        if (image) return make_error("bad_data", f.path() + ": sample " + std::string(key) + " has two images, " + image->name + " and " + m.name);
        image = &m;
      } else if (ext == "cls") {
        std::string text(reinterpret_cast<const char*>(f.bytes() + m.offset), std::min<std::size_t>(m.size, 32));
        const auto first = text.find_first_not_of(" \t\r\n"), last = text.find_last_not_of(" \t\r\n");
        text = first == std::string::npos ? "" : text.substr(first, last - first + 1);
        if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); }))
          return make_error("bad_data", f.path() + ": member " + m.name + " is not a class id (a number 0 or more in decimal)");
        label = std::stoll(text);
      }
    }
    if (!image) return make_error("bad_data", f.path() + ": sample " + std::string(key) + " has no image (KEY.png, .jpg or .jpeg)");
    if (!label) return make_error("bad_data", f.path() + ": sample " + std::string(key) + " has no class (KEY.cls)");
    if (names.size() + image->name.size() > UINT32_MAX) return make_error("bad_data", f.path() + ": too many members to list (their names pass 4 GiB)");
    out.push_back({shard, static_cast<std::int32_t>(*label), static_cast<std::uint32_t>(names.size()), static_cast<std::uint32_t>(image->name.size()),
                   image->offset, file_stamp{image->size, 0, 0}});
    names += image->name;
    i = j;
  }
  return ok_status();
}

// A split's samples: the catalogue's that `at` picks, in order; source k + 1 is shard k.
class tar_samples final : public sample_store {
 public:
  tar_samples(std::shared_ptr<const catalogue> listed, std::vector<std::uint32_t> at, source s, std::uint64_t fp)
      : listed_(std::move(listed)), at_(std::move(at)), s_(std::move(s)), fp_(fp) {}
  int size() const override { return static_cast<int>(at_.size()); }
  void values(int i, std::int64_t step, float* out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    // Opened for each read, not kept: a data set of thousands of shards holds no descriptor each.
    const auto& x = (*listed_)[at_[static_cast<std::size_t>(i)]];
    const auto& shard = listed_->sources()[x.source];
    const std::string path = s_.path + '/' + shard.path;
    const std::string what = path + ": member " + std::string(listed_->name(x)) + " (sample " + std::to_string(i) + ")";
    const auto now = stamp_of(path);
    if (!now || !now->same_file(shard.stamp)) throw std::runtime_error(what + ": the file changed after it was listed");
    std::string bytes(x.stamp.size, '\0');
    if (!read_at(path, x.offset, bytes.size(), bytes.data()))
      throw std::runtime_error(what + ": cannot be read");
    std::string why;
    if (!image_values(bytes, s_, i, step, out, why)) throw std::runtime_error(what + ": does not decode as PNG or JPEG (" + why + ")");
  }
  std::int64_t label(int i) const override { return (*listed_)[at_[static_cast<std::size_t>(i)]].label; }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_.load(); }
  bool decodes() const override { return true; }

 private:
  std::shared_ptr<const catalogue> listed_;
  std::vector<std::uint32_t> at_;
  source s_;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

std::vector<std::string> tars_in(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".tar" && it->is_regular_file(ec)) out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A split's shards as a catalogue (source 0 the split's folder, source k + 1 shard k with its
// digest): mapped as it is while every shard and the folder are as listed (no header read);
// else each shard's digest found in the index or made, and its headers read.
result<std::shared_ptr<const catalogue>> list_shards(const std::string& root, const std::string& split) {
  if (auto c = catalogue::load(root, split, "tar")) return std::make_shared<const catalogue>(std::move(*c));
  const std::string dir = root + "/" + split;
  // The folder stamped before its listing: a shard added meanwhile lists again.
  std::vector<catalogue::source_file> sources{{split, stamp_of(dir).value_or(file_stamp{})}};
  const auto paths = tars_in(dir);
  if (paths.empty()) return make_error("bad_data", dir + ": no .tar shards in it");
  if (paths.size() >= UINT32_MAX) return make_error("bad_data", dir + ": too many shards");
  auto index = identity_index::open(root);
  std::vector<listed_sample> samples;
  std::string names;
  for (std::size_t k = 0; k < paths.size(); ++k) {
    auto was = stamp_of(paths[k]);  // what its reads are checked against
    auto f = mapped_file::open(paths[k]);
    if (!f) return f.err();
    if (!was) return make_error("io", paths[k] + ": cannot read it");
    const auto digest = indexed_pass(**f, 0, (*f)->size(), index, "bytes", [](std::size_t, std::size_t) { return ok_status(); });
    if (!digest) return digest.err();
    was->digest = *digest;
    if (auto st = samples_of(**f, static_cast<std::uint32_t>(k + 1), samples, names); !st) return st.err();
    (*f)->release(0, (*f)->size());
    sources.push_back({split + "/" + fs::path(paths[k]).filename().string(), *was});
  }
  index.save();
  auto c = std::make_shared<const catalogue>("tar", std::move(sources), std::move(samples), std::move(names));
  c->save(root, split);
  return c;
}

}  // namespace

bool holds_tar_shards(const std::string& dir) { return !tars_in(dir).empty(); }

result<dataset> load_image_shards(const source& s, bool train) {
  const bool own = !train && holds_tar_shards(s.path + "/val");
  const std::string split = own ? "val" : "train", dir = s.path + "/" + split;
  auto listed = list_shards(s.path, split);
  if (!listed) return listed.err();
  const auto& c = **listed;
  if (c.size() > INT32_MAX) return make_error("bad_data", dir + ": more than 2^31 - 1 samples in its shards");
  hasher h;  // the job's image options, then each shard's digest, then the split's samples
  for (std::uint64_t v : {std::uint64_t(s.image_rows), std::uint64_t(s.image_cols), std::uint64_t(s.image_channels), std::uint64_t(s.crop_pad),
                          std::uint64_t(s.flip), std::uint64_t(own)})
    h.add(v);
  for (const auto* v : {&s.mean, &s.std_dev})
    for (const double m : *v) h.add(static_cast<std::uint64_t>(std::llround(m * 1e9)));
  for (std::size_t k = 1; k < c.sources().size(); ++k) h.add(c.sources()[k].stamp.digest);
  std::vector<std::uint32_t> at;  // without a val folder, every round(1 / val_share)-th sample is held out, as for folders
  const std::size_t every = static_cast<std::size_t>(std::max(2, static_cast<int>(std::lround(1.0 / s.val_share))));
  int top = 0;
  for (std::size_t k = 0; k < c.size(); ++k) {
    const auto& x = c[k];
    if (s.classes > 0 && x.label >= s.classes)  // the job's classes may have changed since the listing
      return make_error("bad_data", s.path + "/" + c.sources()[x.source].path + ": member " + std::string(c.name(x)) + " is class " +
                                        std::to_string(x.label) + ", outside 0.." + std::to_string(s.classes - 1));
    top = std::max(top, x.label);
    if (!(own || (k % every == every - 1) != train)) continue;
    at.push_back(static_cast<std::uint32_t>(k));
    h.add(static_cast<std::uint64_t>(x.label));
    h.add(static_cast<std::uint64_t>(x.source - 1));
    h.add(x.offset);
  }
  if (at.size() < (own ? 1u : 2u)) return make_error("bad_data", dir + ": too few samples in its shards");
  c.release();
  dataset d;
  d.channels = s.image_channels, d.rows = s.image_rows, d.cols = s.image_cols;
  d.classes = s.classes > 0 ? s.classes : top + 1;
  d.store = std::make_shared<tar_samples>(std::move(*listed), std::move(at), s, h.value());
  return d;
}

}  // namespace dynapar::data
