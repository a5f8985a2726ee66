#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dynapar {

std::size_t mapped_file::page() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

result<std::shared_ptr<mapped_file>> mapped_file::create(const std::string& dir, std::size_t bytes) {
  const auto fail = [&](const std::string& what, int e) {
    return make_error("offload", "optimizer state in '" + dir + "': " + what + ": " + std::strerror(e));
  };
  if (bytes == 0) bytes = page();
  std::string name = dir + "/dynapar-state-XXXXXX";
  std::vector<char> path(name.begin(), name.end());
  path.push_back('\0');
  const int fd = mkstemp(path.data());
  if (fd < 0) return fail("cannot make a file", errno);
  unlink(path.data());  // gone with the process, whatever ends it
  // posix_fallocate returns its error (it does not set errno).
  if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
    close(fd);
    return fail("no room for " + std::to_string(bytes >> 20) + " MB", e);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return fail("cannot map " + std::to_string(bytes >> 20) + " MB", e);
  return std::shared_ptr<mapped_file>(new mapped_file(static_cast<char*>(p), bytes));
}

mapped_file::~mapped_file() { munmap(base_, size_); }

void mapped_file::release(const void* p, std::size_t bytes) const {
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + bytes;
  lo = std::max(base, lo / page() * page());
  hi = std::min(base + size_, (hi + page() - 1) / page() * page());
  // A shared file mapping's dirty pages go to the page cache, to be written to the file: no
  // data is lost (anonymous memory would read back as zeros).
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

status check_mapped_dir(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return make_error("offload", "'" + dir + "' is not a directory");
  auto f = mapped_file::create(dir, mapped_file::page());
  if (!f) return f.err();
  return ok_status();
}

}  // namespace dynapar
