#include "engine/base/file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace plumb {
namespace {

std::unexpected<Error> io_error(int err, std::string msg) {
  return std::unexpected(Error{err == ENOENT ? cni_code::kNotFound : cni_code::kIo, err, std::move(msg), {}});
}

/// "<path>.tmp.<16 hex digits>": unique per call, in the same directory as `path`.
std::string temp_name(const std::string& path) {
  uint64_t r = 0;
  while (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, ".tmp.%016llx", static_cast<unsigned long long>(r));
  return path + buf;
}

Status write_all(int fd, std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error{cni_code::kIo, errno, {}, {}});
    off += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

Result<std::string> read_file(const std::string& path, std::string_view what, size_t max_bytes) {
  std::string msg = "read " + (what.empty() ? std::string() : std::string(what) + " ") + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(errno, msg);
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

Status write_atomic(const std::string& path, std::string_view data, WriteOptions opts) {
  std::string tmp = temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, opts.mode);
  if (fd < 0) return io_error(errno, "write " + path + " (create " + tmp + ")");
  auto abandon = [&](int err, const std::string& what) -> Status {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return std::unexpected(Error{cni_code::kIo, err, what, {}});
  };
  if (auto st = write_all(fd, data); !st) return abandon(st.error().sys_errno, "write " + path);
  // The umask applied at open(); the mode asked for is the mode the file gets.
  if (::fchmod(fd, opts.mode) != 0) return abandon(errno, "chmod " + tmp);
  if (opts.fsync && ::fsync(fd) != 0) return abandon(errno, "fsync " + tmp);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return abandon(errno, "write " + path);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return abandon(errno, "rename " + tmp + " to " + path);
  return {};
}

Status write_via_spare(const std::string& path, const std::string& spare, std::string_view data, mode_t mode, bool last) {
  int fd = ::open(spare.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return io_error(errno, "write " + path + " (open " + spare + ")");
  size_t off = 0;
  int err = 0;
  while (off < data.size() && err == 0) {
    ssize_t n = ::pwrite(fd, data.data() + off, data.size() - off, static_cast<off_t>(off));
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) off += static_cast<size_t>(n);
  }
  if (err == 0 && ::ftruncate(fd, static_cast<off_t>(data.size())) != 0) err = errno;
  if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) return std::unexpected(Error{cni_code::kIo, err, "write " + spare, {}});
  if (!last && ::renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) return {};
  // The final version, no `path` yet (ENOENT), or no RENAME_EXCHANGE here (EINVAL): a rename.
  if (::rename(spare.c_str(), path.c_str()) != 0) return io_error(errno, "rename " + spare + " to " + path);
  return {};
}

Status mkdir_p(const std::string& path, mode_t mode) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (prefix.empty() || prefix.back() == '/') continue;
    if (::mkdir(prefix.c_str(), mode) == 0) {
      if (::chmod(prefix.c_str(), mode) != 0) return io_error(errno, "chmod directory " + prefix);  // not the umask's
      continue;
    }
    if (errno != EEXIST) return io_error(errno, "create directory " + prefix);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error(errno, "stat directory " + path);
  if (!S_ISDIR(st.st_mode)) return io_error(ENOTDIR, "create directory " + path);
  return {};
}

Result<std::vector<std::string>> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return io_error(errno, "list directory " + dir);
  }
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    out.emplace_back(name);
  }
  ::closedir(d);
  return out;
}

}  // namespace plumb
