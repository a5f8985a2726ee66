// Memory backed by a file of its own instead of the process's anonymous memory: what lets a
// node keep its optimizer's moments on its local disk between steps (`--offload-optimizer`,
// docs/RUNTIME.md). The file is unlinked at once, so it goes with the process, crash or not;
// its blocks are reserved when it is made, so that a full disk is an error then, never a
// SIGBUS at a later write through the mapping. Pages read or written count as the process's
// resident memory until `release` lets them go; they stay in the file (and the page cache).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace dynapar {

class mapped_file {
 public:
  // `bytes` of zeros in a new file in `dir` (an existing directory).
  static result<std::shared_ptr<mapped_file>> create(const std::string& dir, std::size_t bytes);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  char* data() const { return base_; }
  std::size_t size() const { return size_; }
  bool contains(const void* p) const { return p >= base_ && static_cast<const char*>(p) < base_ + size_; }
  // Drops the pages overlapping [p, p + bytes) from the resident set, their contents kept in
  // the file. Whole pages: the caller's ranges start on page boundaries and own their last page.
  void release(const void* p, std::size_t bytes) const;
  void release_all() const { release(base_, size_); }
  static std::size_t page();
  // `bytes` rounded up to whole pages: a slot that release() may let go of without touching
  // the next one's.
  static std::size_t whole_pages(std::size_t bytes) { return (bytes + page() - 1) / page() * page(); }

 private:
  mapped_file(char* base, std::size_t size) : base_(base), size_(size) {}
  char* base_;
  std::size_t size_;
};

// Whether `dir` is a directory this process can make such a file in; the error names it.
status check_mapped_dir(const std::string& dir);

}  // namespace dynapar
