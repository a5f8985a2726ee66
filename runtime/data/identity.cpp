#include "data/identity.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "data/hash.hpp"

namespace dynapar::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* header = "dynapar data index 1";

std::optional<std::pair<std::uint64_t, std::int64_t>> size_and_time(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return std::pair{static_cast<std::uint64_t>(st.st_size), static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/dynapar";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/dynapar";
  return "";
}

}  // namespace

identity_index identity_index::open(const std::string& root) {
  identity_index ix;
  std::error_code ec;
  const auto abs = fs::absolute(root, ec).lexically_normal();
  ix.root_ = root;
  const std::string beside = (abs / ".dynapar-index").string();
  hasher h;
  const std::string name = abs.string();
  h.add(reinterpret_cast<const std::uint8_t*>(name.data()), name.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  const std::string elsewhere = cache_dir().empty() ? "" : cache_dir() + "/index-" + hex;
  ix.file_ = ::access(abs.c_str(), W_OK) == 0 || elsewhere.empty() ? beside : elsewhere;
  for (const auto& f : {beside, elsewhere}) {
    std::ifstream in(f);
    std::string line;
    if (f.empty() || !in || !std::getline(in, line) || line != header) continue;
    decltype(entries_) got;
    bool whole = true;
    while (std::getline(in, line)) {  // what, a tab, size mtime_ns digest (hex), a tab, path
      std::istringstream fields(line);
      std::string what, path;
      stamp s;
      if (!std::getline(fields, what, '\t') || !(fields >> s.size >> s.mtime_ns >> std::hex >> s.digest) || fields.get() != '\t' ||
          !std::getline(fields, path) || path.empty()) {
        whole = false;  // a torn or edited index: read nothing of it
        break;
      }
      got[what + '\t' + path] = s;
    }
    if (!whole) continue;
    ix.entries_ = std::move(got);
    break;
  }
  return ix;
}

std::string identity_index::key(const std::string& path, const std::string& what) const {
  const bool under = path.size() > root_.size() && path.compare(0, root_.size(), root_) == 0;
  return what + '\t' + (under ? path.substr(root_.size()) : path);
}

std::optional<std::uint64_t> identity_index::find(const std::string& path, const std::string& what) {
  const auto it = entries_.find(key(path, what));
  if (it == entries_.end()) return std::nullopt;
  const auto now = size_and_time(path);
  if (!now || now->first != it->second.size || now->second != it->second.mtime_ns) return std::nullopt;
  ++reused_;
  return it->second.digest;
}

void identity_index::put(const std::string& path, const std::string& what, std::uint64_t digest) {
  ++made_;
  const auto now = size_and_time(path);
  if (!now || path.find_first_of("\t\n") != std::string::npos || what.find_first_of("\t\n") != std::string::npos) return;
  entries_[key(path, what)] = stamp{now->first, now->second, digest};
  changed_ = true;
}

void identity_index::save() {
  if (!changed_) return;
  std::error_code ec;
  fs::create_directories(fs::path(file_).parent_path(), ec);
  const std::string tmp = file_ + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << header << '\n';
    for (const auto& [k, s] : entries_) {
      const auto tab = k.find('\t');
      out << k.substr(0, tab) << '\t' << s.size << ' ' << s.mtime_ns << ' ' << std::hex << s.digest << std::dec << k.substr(tab) << '\n';
    }
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, file_, ec);
  if (ec) fs::remove(tmp, ec);
  changed_ = false;
}

}  // namespace dynapar::data
