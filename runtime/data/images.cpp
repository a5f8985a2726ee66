#include "data/images.hpp"

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "common/rng.hpp"
#include "data/hash.hpp"
#include "data/identity.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

struct image_file {
  std::string path;
  int label = 0;
  file_stamp stamp;  // its size, time and digest as indexed: what it must still be when read
};

result<std::string> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("io", path + ": cannot read it");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What the fingerprint takes of a file: its size and bytes.
std::uint64_t digest_of(const std::string& bytes) {
  hasher h;
  h.add(bytes.size());
  h.add(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return h.value();
}

// Decodes `bytes` to rows x cols x channels bytes (HWC); "" when they are not an image.
std::string decode(const std::string& bytes, const source& s, std::string* why = nullptr) {
  int w = 0, h = 0, got = 0;
  unsigned char* px = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()), &w, &h,
                                            &got, s.image_channels);
  if (!px) {
    if (why) *why = stbi_failure_reason() ? stbi_failure_reason() : "not an image";
    return "";
  }
  std::string out(static_cast<std::size_t>(s.image_rows) * s.image_cols * s.image_channels, '\0');
  if (w == s.image_cols && h == s.image_rows) {  // as it is: a resize to its own size would blur it
    std::copy(px, px + out.size(), out.begin());
    stbi_image_free(px);
    return out;
  }
  const bool ok = stbir_resize_uint8(px, w, h, 0, reinterpret_cast<unsigned char*>(out.data()), s.image_cols, s.image_rows, 0, s.image_channels) == 1;
  stbi_image_free(px);
  if (!ok) {
    if (why) *why = "cannot resize it";
    return "";
  }
  return out;
}

class image_samples final : public sample_store {
 public:
  image_samples(std::vector<image_file> files, source s, std::uint64_t fp) : files_(std::move(files)), s_(std::move(s)), fp_(fp) {}
  int size() const override { return static_cast<int>(files_.size()); }
  void values(int i, std::int64_t step, float* out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    const int R = s_.image_rows, C = s_.image_cols, K = s_.image_channels;
    for (int k = 0; k < K; ++k)  // the padding: a zero pixel
      std::fill(out + static_cast<std::size_t>(k) * R * C, out + static_cast<std::size_t>(k + 1) * R * C,
                static_cast<float>((0.0 - mean_of(s_, k)) / std_of(s_, k)));
    // Decoded only here, when a batch needs it: one that does not decode is a named error at
    // run time (the driver's run ends with it; a node refuses the step), never a blank
    // image trained on.
    const auto& f = files_[i];
    const auto now = stamp_of(f.path);
    auto bytes = read_bytes(f.path);
    if (!bytes) throw std::runtime_error(bytes.err().message + " (sample " + std::to_string(i) + ")");
    // A file whose size or time is not the index's is read as it is only if its bytes are
    // still those the fingerprint was made of (a touch); else the run ends naming it.
    if (now && !now->same_file(f.stamp) && digest_of(*bytes) != f.stamp.digest)
      throw std::runtime_error(f.path + " (sample " + std::to_string(i) + "): changed after the data's index (" + s_.path +
                               "/.dynapar-index) recorded it; remove the index to read every file again");
    std::string why;
    const std::string px = decode(*bytes, s_, &why);
    if (px.empty()) throw std::runtime_error(files_[i].path + " (sample " + std::to_string(i) + "): does not decode as PNG or JPEG (" + why + ")");
    // Augmentation drawn from the job's seed, the sample and the step only: every device and
    // plan, and the single-device reference, draw the same.
    int dy = 0, dx = 0;
    bool mirror = false;
    if (step >= 0 && (s_.crop_pad > 0 || s_.flip)) {
      rng r(s_.seed ^ (static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL) ^ (static_cast<std::uint64_t>(step) * 0xc2b2ae3d27d4eb4fULL));
      if (s_.crop_pad > 0) {
        dy = static_cast<int>(r.below(2 * s_.crop_pad + 1)) - s_.crop_pad;
        dx = static_cast<int>(r.below(2 * s_.crop_pad + 1)) - s_.crop_pad;
      }
      mirror = s_.flip && r.below(2) == 1;
    }
    // HWC bytes to CHW floats; a crop's pixels outside the image stay the padding (zero).
    for (int y = 0; y < R; ++y)
      for (int x = 0; x < C; ++x) {
        const int sy = y + dy, sx0 = x + dx;
        if (sy < 0 || sy >= R || sx0 < 0 || sx0 >= C) continue;
        const int sx = mirror ? C - 1 - sx0 : sx0;
        for (int k = 0; k < K; ++k) {
          const double v = static_cast<unsigned char>(px[(static_cast<std::size_t>(sy) * C + sx) * K + k]) / 255.0;
          out[(static_cast<std::size_t>(k) * R + y) * C + x] = static_cast<float>((v - mean_of(s_, k)) / std_of(s_, k));
        }
      }
  }
  std::int64_t label(int i) const override { return files_[i].label; }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_.load(); }
  bool decodes() const override { return true; }

 private:
  std::vector<image_file> files_;
  source s_;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

// Each file's digest (its bytes), where the listing did not bring it: from the index where
// the file is as it was, else read now on up to 8 threads (reading a large folder one file
// after another took most of a run's start). Nothing is decoded: a file that does not is
// named when a batch reads it. The error is the first unreadable file's in the files' order.
status digest_all(std::vector<image_file>& files, identity_index& index) {
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].stamp.digest != 0) continue;
    if (const auto d = index.find(files[i].path, "bytes")) {
      files[i].stamp = *stamp_of(files[i].path);
      files[i].stamp.digest = *d;
    } else {
      todo.push_back(i);
    }
  }
  std::vector<std::optional<error>> errors(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < todo.size();) {
      auto& f = files[todo[k]];
      try {
        const auto was = stamp_of(f.path);  // before reading: a change meanwhile is read again next time
        auto bytes = was ? read_bytes(f.path) : result<std::string>(make_error("io", f.path + ": cannot read it"));
        if (!bytes) {
          errors[todo[k]] = bytes.err();
          next = todo.size();  // no point reading the rest
          continue;
        }
        f.stamp = *was;
        f.stamp.digest = digest_of(*bytes);
      } catch (const std::exception& e) {  // out of memory for a huge file
        errors[todo[k]] = make_error("io", f.path + ": " + e.what());
        next = todo.size();
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>({8, std::max(1u, std::thread::hardware_concurrency()), todo.size() / 16 + 1});
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // no thread to be had: fewer do the work
      break;
    }
  }
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) return *e;
  for (const std::size_t i : todo) index.put(files[i].path, "bytes", files[i].stamp);
  return ok_status();
}

bool image_name(const std::string& name) {
  std::string e = fs::path(name).extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg";
}

// A split's folder (path/train or path/val): each class folder's images, classes in name
// order, each one's images in name order, labelled by class, with their digests. A class
// folder as it was when last listed is taken from the index (no file of it is looked at
// until a batch reads it); another is listed now, and its files' digests found or made.
result<std::vector<std::pair<std::string, std::vector<image_file>>>> list(const std::string& dir, identity_index& index) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error("bad_data", dir + ": no such folder (images want train/CLASS/FILE)");
  std::vector<std::pair<std::string, std::vector<image_file>>> classes;
  for (const auto& c : fs::directory_iterator(dir, ec))
    if (c.is_directory()) classes.emplace_back(c.path().filename().string(), std::vector<image_file>{});
  if (ec) return make_error("io", dir + ": " + ec.message());
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (classes.empty()) return make_error("bad_data", dir + ": no class folders (images want train/CLASS/FILE)");
  std::vector<image_file> fresh;  // the files of the folders listed now
  std::vector<std::pair<std::string, file_stamp>> listed;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const std::string folder = dir + "/" + classes[c].first;
    if (auto known = index.listing(folder, "bytes")) {
      for (auto& [path, stamp] : *known) classes[c].second.push_back({std::move(path), static_cast<int>(c), stamp});
      continue;
    }
    const auto was = stamp_of(folder);  // before listing: a file added meanwhile lists it again next time
    std::vector<std::string> names;
    for (const auto& f : fs::directory_iterator(folder, ec))
      if (f.is_regular_file() && image_name(f.path().filename().string())) names.push_back(f.path().string());
    if (ec) return make_error("io", folder + ": " + ec.message());
    std::sort(names.begin(), names.end());
    for (auto& n : names) classes[c].second.push_back({std::move(n), static_cast<int>(c), {}});
    if (was) listed.emplace_back(folder, *was);
  }
  std::vector<image_file> all;  // on threads together, then back to their classes
  for (auto& [name, files] : classes) all.insert(all.end(), std::make_move_iterator(files.begin()), std::make_move_iterator(files.end()));
  const auto st = digest_all(all, index);
  std::size_t k = 0;
  for (auto& [name, files] : classes)
    for (auto& f : files) f = std::move(all[k++]);
  if (!st) return st.err();
  for (const auto& [folder, was] : listed) {
    const auto at = std::find_if(classes.begin(), classes.end(), [&](const auto& c) { return dir + "/" + c.first == folder; });
    index.record_listing(folder, "bytes", was, at->second.size());
  }
  index.save();
  return classes;
}

}  // namespace

result<dataset> load_images(const source& s, bool train) {
  auto index = identity_index::open(s.path);
  auto names = list(s.path + "/train", index);
  if (!names) return names.err();
  std::error_code ec;
  const bool own = !train && fs::is_directory(s.path + "/val", ec);
  std::vector<image_file> files;
  if (own) {
    auto val = list(s.path + "/val", index);
    if (!val) return val.err();
    for (auto& [name, list] : *val) {
      const auto at = std::find_if(names->begin(), names->end(), [&](const auto& c) { return c.first == name; });
      if (at == names->end()) return make_error("bad_data", s.path + "/val/" + name + ": a class the training folder does not have");
      for (auto& f : list) {
        f.label = static_cast<int>(at - names->begin());
        files.push_back(std::move(f));
      }
    }
  } else {
    const int every = std::max(2, static_cast<int>(std::lround(1.0 / s.val_share)));
    int k = 0;
    for (auto& [name, list] : *names)
      for (auto& f : list)
        if (((k++ % every) == every - 1) != train) files.push_back(std::move(f));
  }
  if (files.size() < 2) return make_error("bad_data", s.path + (own ? "/val" : "/train") + ": fewer than 2 images");
  // The fingerprint: the job's image options, then each file's label and digest.
  hasher h;
  for (std::uint64_t v : {std::uint64_t(s.image_rows), std::uint64_t(s.image_cols), std::uint64_t(s.image_channels), std::uint64_t(s.crop_pad),
                          std::uint64_t(s.flip)})
    h.add(v);
  for (const auto* v : {&s.mean, &s.std_dev})
    for (const double m : *v) h.add(static_cast<std::uint64_t>(std::llround(m * 1e9)));
  for (const auto& f : files) {
    h.add(static_cast<std::uint64_t>(f.label));
    h.add(f.stamp.digest);
  }
  dataset d;
  d.channels = s.image_channels, d.rows = s.image_rows, d.cols = s.image_cols;
  d.classes = static_cast<int>(names->size());
  d.store = std::make_shared<image_samples>(std::move(files), s, h.value());
  return d;
}

}  // namespace dynapar::data
