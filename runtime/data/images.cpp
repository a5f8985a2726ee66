#include "data/images.hpp"

#include <jpeglib.h>
#include <stb_image.h>
#include <stb_image_resize.h>

#include <csetjmp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <tuple>

#include "common/rng.hpp"
#include "data/catalogue.hpp"
#include "data/hash.hpp"
#include "data/identity.hpp"
#include "data/shards.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

// One image: its folder (a number into the data set's folders) and name, kept apart so that a
// million of them hold no path each (a name of up to 15 characters allocates nothing).
struct image_file {
  std::uint32_t folder = 0;
  std::string name;
  int label = 0;
  file_stamp stamp;  // its size, time and digest as indexed: what it must still be when read
};

std::string path_of(const std::vector<std::string>& folders, const image_file& f) { return folders[f.folder] + '/' + f.name; }

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

// libjpeg's errors end the decode through a jump back (its default handler exits the process).
struct jpeg_failure {
  jpeg_error_mgr mgr;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_jpeg_error(j_common_ptr c) {
  auto* f = reinterpret_cast<jpeg_failure*>(c->err);
  (*c->err->format_message)(c, f->message);
  std::longjmp(f->back, 1);
}

// A JPEG decoded by libjpeg-turbo at the smallest of its scales (1/8, 1/4, 1/2, 1) that is still
// at least rows x cols, to `channels` (grey or RGB) HWC bytes in `out` (w x h): a large photo
// resized far down decodes a sixty-fourth of its blocks' coefficients. False: `why`. (Only
// plain data lives between the jump's two ends.)
bool decode_jpeg(const std::string& bytes, const source& s, std::vector<unsigned char>& out, int& w, int& h, std::string& why) {
  jpeg_decompress_struct d;
  jpeg_failure f;
  d.err = jpeg_std_error(&f.mgr);
  f.mgr.error_exit = on_jpeg_error;
  if (setjmp(f.back)) {
    why = f.message;
    jpeg_destroy_decompress(&d);
    return false;
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d, TRUE);
  d.out_color_space = s.image_channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  d.dct_method = JDCT_ISLOW;  // the exact integer transform: the same bits on every machine
  d.scale_num = 1;
  d.scale_denom = 1;
  for (unsigned denom = 8; denom > 1; denom /= 2)
    if (d.image_width / denom >= static_cast<unsigned>(s.image_cols) && d.image_height / denom >= static_cast<unsigned>(s.image_rows)) {
      d.scale_denom = denom;
      break;
    }
  jpeg_start_decompress(&d);
  w = static_cast<int>(d.output_width), h = static_cast<int>(d.output_height);
  out.resize(static_cast<std::size_t>(w) * h * s.image_channels);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = out.data() + static_cast<std::size_t>(d.output_scanline) * w * s.image_channels;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return true;
}

// Decodes `bytes` to rows x cols x channels bytes (HWC); "" when they are not an image.
std::string decode(const std::string& bytes, const source& s, std::string* why = nullptr) {
  int w = 0, h = 0, got = 0;
  std::vector<unsigned char> jpeg;
  unsigned char* px = nullptr;
  std::string failed;
  if (bytes.size() > 2 && static_cast<unsigned char>(bytes[0]) == 0xFF && static_cast<unsigned char>(bytes[1]) == 0xD8) {
    if (!decode_jpeg(bytes, s, jpeg, w, h, failed)) {
      if (why) *why = failed;
      return "";
    }
    px = jpeg.data();
  } else {
    px = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()), &w, &h, &got, s.image_channels);
    if (!px) {
      if (why) *why = stbi_failure_reason() ? stbi_failure_reason() : "not an image";
      return "";
    }
  }
  const auto release = [&] {
    if (jpeg.empty()) stbi_image_free(px);
  };
  std::string out(static_cast<std::size_t>(s.image_rows) * s.image_cols * s.image_channels, '\0');
  if (w == s.image_cols && h == s.image_rows) {  // as it is: a resize to its own size would blur it
    std::copy(px, px + out.size(), out.begin());
    release();
    return out;
  }
  const bool ok = stbir_resize_uint8(px, w, h, 0, reinterpret_cast<unsigned char*>(out.data()), s.image_cols, s.image_rows, 0, s.image_channels) == 1;
  release();
  if (!ok) {
    if (why) *why = "cannot resize it";
    return "";
  }
  return out;
}

// A split's images: the catalogue's samples `at` picks (in order), labelled through `labels`
// (the catalogue's class to the data set's: validation folders are labelled by training's).
class image_samples final : public sample_store {
 public:
  image_samples(std::shared_ptr<const catalogue> listed, std::vector<std::uint32_t> at, std::vector<int> labels, source s, std::uint64_t fp)
      : listed_(std::move(listed)), at_(std::move(at)), labels_(std::move(labels)), s_(std::move(s)), fp_(fp) {}
  int size() const override { return static_cast<int>(at_.size()); }
  void values(int i, std::int64_t step, float* out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    // Decoded only here, when a batch needs it: one that does not decode is a named error at
    // run time (the driver's run ends with it; a node refuses the step), never a blank
    // image trained on.
    const auto& f = (*listed_)[at_[static_cast<std::size_t>(i)]];
    const std::string path = s_.path + '/' + listed_->sources()[f.source].path + '/' + std::string(listed_->name(f));
    const auto now = stamp_of(path);
    auto bytes = read_bytes(path);
    if (!bytes) throw std::runtime_error(bytes.err().message + " (sample " + std::to_string(i) + ")");
    // A file whose size or time is not the index's is read as it is only if its bytes are
    // still those the fingerprint was made of (a touch); else the run ends naming it.
    if (now && !now->same_file(f.stamp) && digest_of(*bytes) != f.stamp.digest)
      throw std::runtime_error(path + " (sample " + std::to_string(i) + "): changed after the data's index (" + s_.path +
                               "/.dynapar-index) recorded it; remove the index to read every file again");
    std::string why;
    if (!image_values(*bytes, s_, i, step, out, why))
      throw std::runtime_error(path + " (sample " + std::to_string(i) + "): does not decode as PNG or JPEG (" + why + ")");
  }
  std::int64_t label(int i) const override { return labels_[static_cast<std::size_t>((*listed_)[at_[static_cast<std::size_t>(i)]].label)]; }
  std::uint64_t fingerprint() const override { return fp_; }
  std::int64_t samples_read() const override { return reads_.load(); }
  bool decodes() const override { return true; }

 private:
  std::shared_ptr<const catalogue> listed_;
  std::vector<std::uint32_t> at_;
  std::vector<int> labels_;
  source s_;
  std::uint64_t fp_;
  mutable std::atomic<std::int64_t> reads_{0};
};

// Each file's digest (its bytes), where the listing did not bring it: from the index where
// the file is as it was, else read now on up to 8 threads (reading a large folder one file
// after another took most of a run's start). Nothing is decoded: a file that does not is
// named when a batch reads it. The error is the first unreadable file's in the files' order.
status digest_all(std::vector<image_file>& files, const std::vector<std::string>& folders, identity_index& index) {
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].stamp.digest != 0) continue;
    const std::string path = path_of(folders, files[i]);
    const auto d = index.find(path, "bytes");
    const auto now = d ? stamp_of(path) : std::nullopt;  // gone since the index's look: read (and named) below
    if (d && now) {
      files[i].stamp = *now;
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
      const std::string path = path_of(folders, f);
      try {
        const auto was = stamp_of(path);  // before reading: a change meanwhile is read again next time
        auto bytes = was ? read_bytes(path) : result<std::string>(make_error("io", path + ": cannot read it"));
        if (!bytes) {
          errors[todo[k]] = bytes.err();
          next = todo.size();  // no point reading the rest
          continue;
        }
        f.stamp = *was;
        f.stamp.digest = digest_of(*bytes);
      } catch (const std::exception& e) {  // out of memory for a huge file
        errors[todo[k]] = make_error("io", path + ": " + e.what());
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
  for (const std::size_t i : todo) index.put(path_of(folders, files[i]), "bytes", files[i].stamp);
  return ok_status();
}

bool image_name(const std::string& name) {
  std::string e = fs::path(name).extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg";
}

// A split's folder (ROOT/train or ROOT/val) as a catalogue: source 0 the split's folder,
// source c + 1 class c's folder (classes in name order), their images each in name order,
// labelled by class, with their digests. A catalogue whose folders are all as listed is
// mapped as it is: no image file, and not the index, is read. Else a class folder as it was
// when last listed is taken from the index (no file of it is looked at until a batch reads
// it); another is listed now, and its files' digests found or made.
result<std::shared_ptr<const catalogue>> list(const std::string& root, const std::string& split) {
  if (auto c = catalogue::load(root, split, "images")) return std::make_shared<const catalogue>(std::move(*c));
  const std::string dir = root + "/" + split;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error("bad_data", dir + ": no such folder (images want train/CLASS/FILE)");
  auto index = identity_index::open(root);
  std::vector<catalogue::source_file> sources{{split, stamp_of(dir).value_or(file_stamp{})}};  // before listing: a class added meanwhile lists again
  std::vector<std::string> classes, folders;
  for (const auto& c : fs::directory_iterator(dir, ec))
    if (c.is_directory()) classes.push_back(c.path().filename().string());
  if (ec) return make_error("io", dir + ": " + ec.message());
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) return make_error("bad_data", dir + ": no class folders (images want train/CLASS/FILE)");
  std::vector<image_file> files;
  std::vector<std::pair<std::uint32_t, std::size_t>> listed;  // folders listed now, and their files
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const auto folder = static_cast<std::uint32_t>(folders.size());
    folders.push_back(dir + "/" + classes[c]);
    const int label = static_cast<int>(c);
    const auto was = stamp_of(folders.back());  // before listing: a file added meanwhile lists it again next time
    sources.push_back({split + "/" + classes[c], was.value_or(file_stamp{})});
    if (auto known = index.listing(folders.back(), "bytes")) {
      files.reserve(files.size() + known->size());
      for (auto& [name, stamp] : *known) files.push_back({folder, std::move(name), label, stamp});
      continue;
    }
    std::vector<std::string> names;
    for (const auto& f : fs::directory_iterator(folders.back(), ec))
      if (f.is_regular_file() && image_name(f.path().filename().string())) names.push_back(f.path().filename().string());
    if (ec) return make_error("io", folders.back() + ": " + ec.message());
    std::sort(names.begin(), names.end());
    for (auto& n : names) files.push_back({folder, std::move(n), label, {}});
    listed.emplace_back(folder, names.size());
  }
  if (auto st = digest_all(files, folders, index); !st) return st.err();
  for (const auto& [folder, count] : listed)
    if (const auto& was = sources[folder + 1].stamp; was.mtime_ns != 0) index.record_listing(folders[folder], "bytes", was, count);
  index.save();
  std::vector<listed_sample> samples;
  std::string names;
  samples.reserve(files.size());
  for (const auto& f : files) {
    if (names.size() + f.name.size() > UINT32_MAX) return make_error("bad_data", dir + ": too many files to list (their names pass 4 GiB)");
    samples.push_back({f.folder + 1, f.label, static_cast<std::uint32_t>(names.size()), static_cast<std::uint32_t>(f.name.size()), 0, f.stamp});
    names += f.name;
  }
  auto c = std::make_shared<const catalogue>("images", std::move(sources), std::move(samples), std::move(names));
  c->save(root, split);
  return c;
}

}  // namespace

bool image_values(const std::string& bytes, const source& s, int i, std::int64_t step, float* out, std::string& why) {
  const std::string px = decode(bytes, s, &why);
  if (px.empty()) return false;
  const int R = s.image_rows, C = s.image_cols, K = s.image_channels;
  for (int k = 0; k < K; ++k)  // the padding: a zero pixel
    std::fill(out + static_cast<std::size_t>(k) * R * C, out + static_cast<std::size_t>(k + 1) * R * C, static_cast<float>((0.0 - mean_of(s, k)) / std_of(s, k)));
  // Augmentation drawn from the job's seed, the sample and the step only: every device and
  // plan, and the single-device reference, draw the same.
  int dy = 0, dx = 0;
  bool mirror = false;
  if (step >= 0 && (s.crop_pad > 0 || s.flip)) {
    rng r(s.seed ^ (static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL) ^ (static_cast<std::uint64_t>(step) * 0xc2b2ae3d27d4eb4fULL));
    if (s.crop_pad > 0) {
      dy = static_cast<int>(r.below(2 * s.crop_pad + 1)) - s.crop_pad;
      dx = static_cast<int>(r.below(2 * s.crop_pad + 1)) - s.crop_pad;
    }
    mirror = s.flip && r.below(2) == 1;
  }
  // HWC bytes to CHW floats; a crop's pixels outside the image stay the padding (zero).
  for (int y = 0; y < R; ++y)
    for (int x = 0; x < C; ++x) {
      const int sy = y + dy, sx0 = x + dx;
      if (sy < 0 || sy >= R || sx0 < 0 || sx0 >= C) continue;
      const int sx = mirror ? C - 1 - sx0 : sx0;
      for (int k = 0; k < K; ++k) {
        const double v = static_cast<unsigned char>(px[(static_cast<std::size_t>(sy) * C + sx) * K + k]) / 255.0;
        out[(static_cast<std::size_t>(k) * R + y) * C + x] = static_cast<float>((v - mean_of(s, k)) / std_of(s, k));
      }
    }
  return true;
}

result<dataset> load_images(const source& s, bool train) {
  if (holds_tar_shards(s.path + "/train")) return load_image_shards(s, train);
  auto listed = list(s.path, "train");
  if (!listed) return listed.err();
  const auto class_of = [](const catalogue& c, std::size_t k) { return fs::path(c.sources()[k + 1].path).filename().string(); };
  const std::size_t classes = (*listed)->sources().size() - 1;
  std::vector<int> labels(classes);
  std::iota(labels.begin(), labels.end(), 0);
  std::error_code ec;
  const bool own = !train && fs::is_directory(s.path + "/val", ec);
  std::vector<std::uint32_t> at;
  if (own) {
    auto val = list(s.path, "val");
    if (!val) return val.err();
    labels.assign((*val)->sources().size() - 1, 0);
    for (std::size_t k = 0; k < labels.size(); ++k) {  // labelled by the training folder's classes
      const auto name = class_of(**val, k);
      std::size_t c = 0;
      while (c < classes && class_of(**listed, c) != name) ++c;
      if (c == classes) return make_error("bad_data", s.path + "/val/" + name + ": a class the training folder does not have");
      labels[k] = static_cast<int>(c);
    }
    listed = std::move(val);
    at.resize((*listed)->size());
    std::iota(at.begin(), at.end(), 0u);
  } else {
    const std::size_t every = static_cast<std::size_t>(std::max(2, static_cast<int>(std::lround(1.0 / s.val_share))));
    for (std::size_t k = 0; k < (*listed)->size(); ++k)
      if ((k % every == every - 1) != train) at.push_back(static_cast<std::uint32_t>(k));
  }
  if (at.size() < 2) return make_error("bad_data", s.path + (own ? "/val" : "/train") + ": fewer than 2 images");
  if ((*listed)->size() > UINT32_MAX) return make_error("bad_data", s.path + ": more than 2^32 images in a split");
  // The fingerprint: the job's image options, then each file's label and digest.
  hasher h;
  for (std::uint64_t v : {std::uint64_t(s.image_rows), std::uint64_t(s.image_cols), std::uint64_t(s.image_channels), std::uint64_t(s.crop_pad),
                          std::uint64_t(s.flip)})
    h.add(v);
  for (const auto* v : {&s.mean, &s.std_dev})
    for (const double m : *v) h.add(static_cast<std::uint64_t>(std::llround(m * 1e9)));
  for (const auto k : at) {
    const auto& f = (**listed)[k];
    h.add(static_cast<std::uint64_t>(labels[static_cast<std::size_t>(f.label)]));
    h.add(f.stamp.digest);
  }
  (*listed)->release();  // a node reads its own samples' entries, not all of them
  dataset d;
  d.channels = s.image_channels, d.rows = s.image_rows, d.cols = s.image_cols;
  d.classes = static_cast<int>(classes);
  d.store = std::make_shared<image_samples>(std::move(*listed), std::move(at), std::move(labels), s, h.value());
  return d;
}

}  // namespace dynapar::data
