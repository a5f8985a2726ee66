#include "data/identity.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "data/hash.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* header = "dynapar data index 3";

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/dynapar";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/dynapar";
  return "";
}

// One line: what, a tab, the path, a tab, size mtime_ns digest (hex); the key is the line up
// to its last tab. False: not such a line.
bool parse(const char* p, const char* end, std::string_view& key, file_stamp& s) {
  const char* first = std::find(p, end, '\t');
  const char* last = end;
  while (last > p && last[-1] != '\t') --last;
  if (first == end || first == p || last - 1 <= first + 1) return false;
  const char* at = last;
  auto number = [&](auto& v, int base) {
    const auto r = std::from_chars(at, end, v, base);
    if (r.ec != std::errc()) return false;
    at = r.ptr;
    return true;
  };
  if (!number(s.size, 10) || at == end || *at++ != ' ' || !number(s.mtime_ns, 10) || at == end || *at++ != ' ' || !number(s.digest, 16) ||
      at != end)
    return false;
  key = std::string_view(p, static_cast<std::size_t>(last - 1 - p));
  return true;
}

// Where the index of `root` lies: beside the data, or where that cannot be written, in the
// cache named by the root's absolute path ("" when there is no cache folder).
std::pair<std::string, std::string> places(const std::string& root) {
  std::error_code ec;
  const auto abs = fs::absolute(root, ec).lexically_normal();
  hasher h;
  const std::string name = abs.string();
  h.add(reinterpret_cast<const std::uint8_t*>(name.data()), name.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  return {(abs / ".dynapar-index").string(), cache_dir().empty() ? "" : cache_dir() + "/index-" + hex};
}

}  // namespace

std::optional<file_stamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return file_stamp{static_cast<std::uint64_t>(st.st_size), static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, 0};
}

std::string identity_index::file_of(const std::string& root) {
  const auto [beside, elsewhere] = places(root);
  return ::access(fs::path(beside).parent_path().c_str(), W_OK) == 0 || elsewhere.empty() ? beside : elsewhere;
}

identity_index identity_index::open(const std::string& root) {
  identity_index ix;
  ix.root_ = root;
  ix.file_ = file_of(root);
  const auto [beside, elsewhere] = places(root);
  for (const auto& f : {beside, elsewhere}) {
    std::ifstream in(f, std::ios::binary | std::ios::ate);
    if (f.empty() || !in) continue;
    std::string text(static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg())), '\0');  // one read, not a character at a time
    in.seekg(0);
    if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) continue;
    const std::string first = std::string(header) + '\n';
    if (text.compare(0, first.size(), first) != 0) continue;
    decltype(entries_) got;
    got.reserve(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')));
    bool whole = true;
    for (std::size_t at = first.size(); at < text.size();) {
      const std::size_t nl = text.find('\n', at);
      std::pair<std::string_view, file_stamp> e;
      // A torn or edited index (a line cut short, keys out of order) is read as none.
      if (nl == std::string::npos || !parse(text.data() + at, text.data() + nl, e.first, e.second) || (!got.empty() && !(got.back().first < e.first))) {
        whole = false;
        break;
      }
      got.push_back(std::move(e));
      at = nl + 1;
    }
    if (!whole) continue;
    ix.entries_ = std::move(got);
    ix.text_ = std::move(text);  // the views stay valid: a moved string keeps its buffer (no small-string copy at this size)
    break;
  }
  return ix;
}

std::string identity_index::key(const std::string& path, const std::string& what) const {
  const bool under = path.size() > root_.size() && path.compare(0, root_.size(), root_) == 0;
  return what + '\t' + (under ? path.substr(root_.size()) : path);
}

const file_stamp* identity_index::at(const std::string& k) const {
  if (const auto it = added_.find(k); it != added_.end()) return &it->second;
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), std::string_view(k), [](const auto& e, std::string_view v) { return e.first < v; });
  return it != entries_.end() && it->first == k ? &it->second : nullptr;
}

std::optional<std::uint64_t> identity_index::find(const std::string& path, const std::string& what) {
  const auto* s = at(key(path, what));
  if (!s) return std::nullopt;
  const auto now = stamp_of(path);
  if (!now || !now->same_file(*s)) return std::nullopt;
  ++reused_;
  return s->digest;
}

void identity_index::put(const std::string& path, const std::string& what, file_stamp was) {
  if (path.find_first_of("\t\n") != std::string::npos || what.find_first_of("\t\n") != std::string::npos) return;
  added_[key(path, what)] = was;
}

std::optional<std::vector<std::pair<std::string, file_stamp>>> identity_index::listing(const std::string& dir, const std::string& what) {
  const auto* listed = at(key(dir, "listed " + what));
  const auto now = stamp_of(dir);
  if (!listed || !now || !now->same_file(*listed)) return std::nullopt;
  // The folder's files are neighbours in the index: from the first key past "what\tdir/",
  // while the keys have that prefix and no further folder.
  const std::string prefix = key(dir, what) + '/';
  std::vector<std::pair<std::string, file_stamp>> out;
  for (auto it = std::lower_bound(entries_.begin(), entries_.end(), std::string_view(prefix), [](const auto& e, std::string_view v) { return e.first < v; });
       it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    if (it->first.find('/', prefix.size()) == std::string_view::npos) out.emplace_back(it->first.substr(prefix.size()), it->second);
  // The listing's count: an entry lost (an index edited by hand) is a listing to make again.
  if (out.size() != listed->digest) return std::nullopt;
  reused_ += static_cast<int>(out.size());
  return out;
}

void identity_index::record_listing(const std::string& dir, const std::string& what, file_stamp was, std::size_t files) {
  was.digest = files;
  added_[key(dir, "listed " + what)] = was;
}

void identity_index::save() {
  if (added_.empty()) return;
  // Both in key order, merged into the new file: what was put now in place of what was read.
  std::vector<std::pair<std::string_view, file_stamp>> added(added_.begin(), added_.end());
  std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::error_code ec;
  fs::create_directories(fs::path(file_).parent_path(), ec);
  const std::string tmp = file_ + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << header << '\n';
    auto write = [&](std::string_view k, const file_stamp& s) {
      char nums[64];
      std::snprintf(nums, sizeof nums, "\t%llu %lld %llx\n", static_cast<unsigned long long>(s.size), static_cast<long long>(s.mtime_ns),
                    static_cast<unsigned long long>(s.digest));
      out.write(k.data(), static_cast<std::streamsize>(k.size()));
      out << nums;
    };
    auto a = added.begin();
    for (const auto& [k, s] : entries_) {
      for (; a != added.end() && a->first < k; ++a) write(a->first, a->second);
      if (a != added.end() && a->first == k) {
        write(a->first, a->second);
        ++a;
      } else {
        write(k, s);
      }
    }
    for (; a != added.end(); ++a) write(a->first, a->second);
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, file_, ec);
  if (ec) fs::remove(tmp, ec);
  // What was saved is what a later find or listing of this index sees again.
  *this = open(root_);
}

}  // namespace dynapar::data
