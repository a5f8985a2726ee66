#include "common/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dynapar {
namespace {

status io_error(const std::string& what, const std::string& path, int err) {
  return make_error("io", "cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

status write_durably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("create", path, errno);
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      return io_error("write", path, e);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    return io_error("sync", path, e);
  }
  return ::close(fd) == 0 ? ok_status() : io_error("close", path, errno);
}

status sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return io_error("open", path, errno);
  const int r = ::fsync(fd), e = errno;
  ::close(fd);
  return r == 0 ? ok_status() : io_error("sync", path, e);
}

}  // namespace dynapar
