// What makes a data set's fingerprint (data/source.hpp) cheap after its first start: each
// file's digest, with what it was checked for, kept in an index beside the data and reused
// while the file's size and modification time are those it was made with. A start then
// reads no file whole: it lists and stats them (docs/FORMATS.md, "Data").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/result.hpp"

namespace dynapar::data {

class identity_index {
 public:
  // The index of the files under `root`: ROOT/.dynapar-index, or where that cannot be written,
  // one under $XDG_CACHE_HOME/dynapar (~/.cache/dynapar) named by the root's absolute path. A
  // missing, unreadable or malformed index is an empty one (every file is read again).
  static identity_index open(const std::string& root);

  // The digest `what` made of `path` (a file under the root), when the file's size and
  // modification time are still those it had then; `what` names the bytes read and what they
  // were checked for ("bytes", "finite 128 4096"), so that another check does not reuse it.
  std::optional<std::uint64_t> find(const std::string& path, const std::string& what);
  // Records a digest made now; `path`'s size and time are taken when it is recorded, so a
  // file changed while it was read is read again next time.
  void put(const std::string& path, const std::string& what, std::uint64_t digest);
  // Writes the index back if it changed (into a new file renamed over the old: several
  // processes starting at once each leave a whole index). Failing to write is not an error
  // the run needs to know: the next start reads the files again.
  void save();

  int reused() const { return reused_; }
  int made() const { return made_; }

 private:
  struct stamp {
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint64_t digest = 0;
  };
  std::string root_, file_;
  std::string key(const std::string& path, const std::string& what) const;  // what, a tab, the path under the root
  std::unordered_map<std::string, stamp> entries_;
  bool changed_ = false;
  int reused_ = 0, made_ = 0;
};

}  // namespace dynapar::data
