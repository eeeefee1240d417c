#include "engine/base/file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace plumb {

Result<std::string> read_file(const std::string& path, std::string_view what, size_t max_bytes) {
  std::string msg = "read " + (what.empty() ? std::string() : std::string(what) + " ") + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return std::unexpected(Error{err == ENOENT ? cni_code::kNotFound : cni_code::kIo, err, msg, {}});
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return std::unexpected(Error{cni_code::kIo, err, msg, {}});
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return std::unexpected(Error{cni_code::kIo, EFBIG, msg, "larger than " + std::to_string(max_bytes) + " bytes"});
    }
  }
  ::close(fd);
  return out;
}

}  // namespace plumb
