// What makes a data set's start cheap after its first: each file's digest, with what it was
// checked for, and each folder's listing, kept in an index beside the data. A later start
// reuses a folder's listing while the folder's modification time is unchanged (adding,
// removing or renaming a file changes it) and a file's digest while its size and
// modification time are; a file read later is checked against them (docs/FORMATS.md, "Data").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace dynapar::data {

// A file's (or folder's) size and modification time, and what the index holds for it.
struct file_stamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t digest = 0;
  bool same_file(const file_stamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
};

// `path`'s size and modification time now (digest 0); none if it is not there.
std::optional<file_stamp> stamp_of(const std::string& path);

class identity_index {
 public:
  // The index of the files under `root`: ROOT/.dynapar-index, or where that cannot be written,
  // one under $XDG_CACHE_HOME/dynapar (~/.cache/dynapar) named by the root's absolute path. A
  // missing, unreadable or malformed index is an empty one (every file is read again).
  static identity_index open(const std::string& root);
  // Where the index of `root` is written (the same for every process: one index a data set).
  static std::string file_of(const std::string& root);

  // The digest `what` made of `path` (a file under the root), when the file's size and
  // modification time are still those it had then; `what` names the bytes read and what they
  // were checked for ("bytes", "finite 128 4096"), so that another check does not reuse it.
  std::optional<std::uint64_t> find(const std::string& path, const std::string& what);
  // Records a digest made of `path` as it was at `was` (its stamp before it was read: a file
  // changed meanwhile is read again next time).
  void put(const std::string& path, const std::string& what, file_stamp was);

  // The names of folder `dir`'s files with a `what` digest, in order, each with its stamp as
  // recorded, when the folder is as it was when listed (record_listing); none otherwise.
  std::optional<std::vector<std::pair<std::string, file_stamp>>> listing(const std::string& dir, const std::string& what);
  // `dir` was listed whole as it was at `was` (its stamp taken before the listing), and each
  // of its `files` put with a `what` digest.
  void record_listing(const std::string& dir, const std::string& what, file_stamp was, std::size_t files);

  // Writes the index back if it changed (into a new file renamed over the old: several
  // processes starting at once each leave a whole index). Failing to write is not an error
  // the run needs to know: the next start reads the files again.
  void save();

  int reused() const { return reused_; }

 private:
  std::string key(const std::string& path, const std::string& what) const;  // what, a tab, the path under the root
  const file_stamp* at(const std::string& key) const;
  std::string root_, file_;
  // By key, in order (the file is written so: read back without sorting, and a folder's
  // files are neighbours), each key a view into text_ (a million files, no allocation each),
  // and what was put since, merged in when saved.
  std::string text_;
  std::vector<std::pair<std::string_view, file_stamp>> entries_;
  std::unordered_map<std::string, file_stamp> added_;
  int reused_ = 0;
};

}  // namespace dynapar::data
