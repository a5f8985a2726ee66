// A split's listing (an image folder's files, a tar shard's members) kept as one binary file
// beside the data's index and mapped, not parsed, at a later start: a start then stats the
// split's folder and its sources (class folders, shards), not a file or header a sample,
// and a process touches the pages of only the samples it reads (docs/FORMATS.md, "Data").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/identity.hpp"

namespace dynapar::data {

class mapped_file;

// One sample as listed: where its bytes are and what they were when listed.
struct listed_sample {
  std::uint32_t source = 0;                  // its folder or tar: a number into the sources
  std::int32_t label = 0;                    // as listed: its class folder's, or its .cls
  std::uint32_t name_at = 0, name_size = 0;  // its file or member name in the names
  std::uint64_t offset = 0;                  // where its bytes start in the source (a tar member's data)
  file_stamp stamp;                          // a file's size, time and digest; a member's size
};

class catalogue {
 public:
  // What the listing was made from: each path relative to the data's root, as it was when
  // listed (a folder's stamp taken before its listing, a file's before its read).
  struct source_file {
    std::string path;
    file_stamp stamp;
  };

  catalogue(std::string what, std::vector<source_file> sources, std::vector<listed_sample> samples, std::string names);

  // Split `split`'s catalogue of the data under `root` (kept beside the data's index,
  // data/identity.hpp), if it lists `what` ("images", "tar"), every source is still as it was,
  // and the index is there (removing the index reads every file again, as errors tell users);
  // none if it is missing, malformed or stale.
  static std::optional<catalogue> load(const std::string& root, const std::string& split, const std::string& what);
  // Written into a new file renamed over the old (processes starting at once each leave a
  // whole one); false if it cannot be, or a source could not be stamped: the next start lists
  // again.
  bool save(const std::string& root, const std::string& split) const;

  std::size_t size() const { return count_; }
  const listed_sample& operator[](std::size_t i) const { return samples_[i]; }
  std::string_view name(const listed_sample& x) const { return {names_ + x.name_at, x.name_size}; }
  const std::vector<source_file>& sources() const { return sources_; }
  // Lets the pages of the samples go (after a pass over them all): a node reads a few.
  void release() const;

 private:
  catalogue() = default;
  std::string what_;
  std::vector<source_file> sources_;
  std::shared_ptr<const mapped_file> mapped_;  // the file loaded, or
  std::shared_ptr<const void> built_;          // the vectors built
  const listed_sample* samples_ = nullptr;
  std::size_t count_ = 0;
  const char* names_ = nullptr;
  std::size_t names_size_ = 0;
};

}  // namespace dynapar::data
