#include "data/catalogue.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "data/npy.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

// The file: this magic, a word that reads back the same only in this byte order, the counts
// (what's size, sources, samples, names' size), `what`, each source (size, time, digest, path's
// size, path), zeros to a multiple of 8, the samples as they are in memory, the names.
constexpr char magic[16] = {'d', 'y', 'n', 'a', 'p', 'a', 'r', ' ', 'l', 'i', 's', 't', 'i', 'n', 'g', '1'};
constexpr std::uint64_t order = 0x0102030405060708ull;
static_assert(std::is_trivially_copyable_v<listed_sample> && sizeof(listed_sample) == 48, "samples are written as they are in memory");

struct built {
  std::vector<listed_sample> samples;
  std::string names;
};

// Reads the file's fields in order; any read past its end fails the whole.
struct reader {
  const std::uint8_t* p;
  std::size_t left;
  bool ok = true;
  const std::uint8_t* take(std::size_t n) {
    if (!ok || n > left) {
      ok = false;
      return nullptr;
    }
    const auto* at = p;
    p += n, left -= n;
    return at;
  }
  std::uint64_t word() {
    std::uint64_t v = 0;
    if (const auto* at = take(8)) std::memcpy(&v, at, 8);
    return v;
  }
};

std::string file_of(const std::string& root, const std::string& split) { return identity_index::file_of(root) + "." + split; }

}  // namespace

catalogue::catalogue(std::string what, std::vector<source_file> sources, std::vector<listed_sample> samples, std::string names)
    : what_(std::move(what)), sources_(std::move(sources)) {
  auto b = std::make_shared<built>(built{std::move(samples), std::move(names)});
  samples_ = b->samples.data(), count_ = b->samples.size();
  names_ = b->names.data(), names_size_ = b->names.size();
  built_ = std::move(b);
}

std::optional<catalogue> catalogue::load(const std::string& root, const std::string& split, const std::string& what) {
  const std::string file = file_of(root, split);
  if (!stamp_of(identity_index::file_of(root)) || ::access(file.c_str(), R_OK) != 0) return std::nullopt;
  auto f = mapped_file::open(file);
  if (!f) return std::nullopt;
  reader r{(*f)->bytes(), (*f)->size()};
  const auto* m = r.take(sizeof magic);
  if (!m || std::memcmp(m, magic, sizeof magic) != 0 || r.word() != order) return std::nullopt;
  const std::uint64_t what_size = r.word(), sources = r.word(), count = r.word(), names_size = r.word();
  const auto* w = r.take(what_size);
  if (!w || std::string_view(reinterpret_cast<const char*>(w), what_size) != what || sources > r.left / 32) return std::nullopt;
  catalogue c;
  c.what_ = what;
  for (std::uint64_t k = 0; k < sources && r.ok; ++k) {
    source_file s;
    s.stamp.size = r.word();
    s.stamp.mtime_ns = static_cast<std::int64_t>(r.word());
    s.stamp.digest = r.word();
    const std::uint64_t n = r.word();
    if (const auto* path = r.take(n)) s.path.assign(reinterpret_cast<const char*>(path), n);
    // Stale: a folder listed again, a shard rewritten, a file added or taken away.
    const auto now = stamp_of(root + "/" + s.path);
    if (!now || !now->same_file(s.stamp)) return std::nullopt;
    c.sources_.push_back(std::move(s));
  }
  r.take((8 - ((*f)->size() - r.left) % 8) % 8);
  if (!r.ok || count > r.left / sizeof(listed_sample) || r.left - count * sizeof(listed_sample) != names_size) return std::nullopt;
  c.samples_ = reinterpret_cast<const listed_sample*>(r.take(count * sizeof(listed_sample)));
  c.names_ = reinterpret_cast<const char*>(r.p);
  c.count_ = count, c.names_size_ = names_size;
  for (std::size_t i = 0; i < c.count_; ++i) {  // a file edited by hand points nowhere else
    const auto& x = c.samples_[i];
    if (x.source >= c.sources_.size() || x.name_at > names_size || x.name_size > names_size - x.name_at) return std::nullopt;
  }
  c.mapped_ = *f;
  return c;
}

bool catalogue::save(const std::string& root, const std::string& split) const {
  for (const auto& s : sources_)
    if (s.stamp.mtime_ns == 0) return false;  // not stamped: nothing to tell it stale by
  const std::string file = file_of(root, split);
  std::error_code ec;
  fs::create_directories(fs::path(file).parent_path(), ec);
  const std::string tmp = file + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    auto word = [&](std::uint64_t v) { out.write(reinterpret_cast<const char*>(&v), 8); };
    out.write(magic, sizeof magic);
    for (const std::uint64_t v : {order, std::uint64_t(what_.size()), std::uint64_t(sources_.size()), std::uint64_t(count_), std::uint64_t(names_size_)}) word(v);
    out << what_;
    for (const auto& s : sources_) {
      for (const std::uint64_t v : {s.stamp.size, std::uint64_t(s.stamp.mtime_ns), s.stamp.digest, std::uint64_t(s.path.size())}) word(v);
      out << s.path;
    }
    const auto at = static_cast<std::uint64_t>(out.tellp());
    out.write("\0\0\0\0\0\0\0", static_cast<std::streamsize>((8 - at % 8) % 8));
    out.write(reinterpret_cast<const char*>(samples_), static_cast<std::streamsize>(count_ * sizeof(listed_sample)));
    out.write(names_, static_cast<std::streamsize>(names_size_));
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

void catalogue::release() const {
  if (mapped_) mapped_->release(0, mapped_->size());
}

}  // namespace dynapar::data
