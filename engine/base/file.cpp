#include "engine/base/file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace plumb {
namespace {

std::unexpected<Error> io_error(int err, std::string msg) {
  std::string details;
  if (err == ELOOP) details = "a symbolic link is there; plumb never follows one below its own directories";
  return std::unexpected(Error{err == ENOENT ? cni_code::kNotFound : cni_code::kIo, err, std::move(msg), std::move(details)});
}

/// An error opening directory `name` (relative to `at`): O_DIRECTORY|O_NOFOLLOW on a link gives
/// ENOTDIR; say ELOOP ("a symbolic link is there") when a link is what is there.
std::unexpected<Error> dir_error(int at, const std::string& name, int err, const std::string& path) {
  struct stat st {};
  if (err == ENOTDIR && ::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) err = ELOOP;
  return io_error(err, "open directory " + path);
}

/// ".tmp.<16 hex digits>": unique per call.
std::string temp_suffix() {
  uint64_t r = 0;
  while (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, ".tmp.%016llx", static_cast<unsigned long long>(r));
  return buf;
}

/// Writes all of `data` at the descriptor's offset, or from offset 0 with `at_start` (pwrite).
Status write_all(int fd, std::string_view data, bool at_start = false) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = at_start ? ::pwrite(fd, data.data() + off, data.size() - off, static_cast<off_t>(off))
                         : ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error{cni_code::kIo, errno, {}, {}});
    off += static_cast<size_t>(n);
  }
  return {};
}

/// Reads all of `fd` (a regular file, checked) up to max_bytes; closes it. `stat_out`, when
/// given, gets its fstat().
Result<std::string> read_fd(int fd, const std::string& msg, size_t max_bytes, struct stat* stat_out = nullptr) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error(err, msg);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket";
    return std::unexpected(Error{cni_code::kIo, EINVAL, msg, std::string("not a regular file: ") + kind});
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
    // A short read that completes the size fstat() gave is the end: no read(2) to be told so.
    // (A size of 0, /proc's, says nothing: read until read(2) returns 0.)
    if (st.st_size > 0 && static_cast<size_t>(n) < sizeof buf && out.size() >= static_cast<size_t>(st.st_size)) break;
  }
  ::close(fd);
  if (stat_out != nullptr) *stat_out = st;
  return out;
}

/// The last component of `path` and the directory holding it ("." when none).
std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

/// The entries of the directory open as `fd` ("." and ".." left out) with getdents64(2):
/// opendir()'s fdopendir() would add an fstat and two fcntl calls per listing. A type the
/// filesystem does not report is asked with fstatat.
Result<std::vector<Dir::Entry>> read_entries(int fd, const std::string& path) {
  std::vector<Dir::Entry> out;
  alignas(struct dirent64) char buf[32768];  // what glibc's readdir asks for at once
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(errno, "list directory " + path);
    if (n == 0) return out;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      Dir::Entry entry{std::string(name), e->d_type};
      if (entry.type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
          entry.type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
        }
      }
      out.push_back(std::move(entry));
    }
  }
}

}  // namespace

bool is_path_component(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

Result<std::string> read_file(const std::string& path, std::string_view what, size_t max_bytes, struct stat* stat_out) {
  std::string msg = "read " + (what.empty() ? std::string() : std::string(what) + " ") + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return io_error(errno, msg);
  return read_fd(fd, msg, max_bytes, stat_out);
}

Status write_atomic(const std::string& path, std::string_view data, WriteOptions opts) {
  auto [dir, name] = split_path(path);
  auto d = Dir::open(dir);
  if (!d) return std::unexpected(d.error().within("write " + path));
  return d->write_atomic(name, data, opts);
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
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return out;
    return io_error(errno, "list directory " + dir);
  }
  for (auto& e : PLUMB_TRY(read_entries(fd.get(), dir))) out.push_back(std::move(e.name));
  return out;
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Status Dir::check_name(std::string_view name) const {
  if (is_path_component(name)) return {};
  return fail(cni_code::kInternal, "\"" + std::string(name) + "\" is not a file name (under " + path_ + ")");
}

Result<Dir> Dir::open(const std::string& path, std::optional<mode_t> create_mode) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create_mode) {  // made only when missing: one open when it exists
    PLUMB_TRY(mkdir_p(p, *create_mode));
    fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) return dir_error(AT_FDCWD, p, errno, p);
  return Dir(fd, p);
}

Result<Dir> Dir::sub(std::string_view name, std::optional<mode_t> create_mode) const {
  PLUMB_TRY(check_name(name));
  const std::string n(name);
  const std::string path = path_of(name);
  int fd = ::openat(fd_.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create_mode) {
    if (::mkdirat(fd_.get(), n.c_str(), *create_mode) != 0 && errno != EEXIST) return io_error(errno, "create directory " + path);
    fd = ::openat(fd_.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && ::fchmod(fd, *create_mode) != 0) {  // the mode asked for, not the umask's
      int err = errno;
      ::close(fd);
      return io_error(err, "chmod directory " + path);
    }
  }
  if (fd < 0) return dir_error(fd_.get(), n, errno, path);
  return Dir(fd, path);
}

Result<std::string> Dir::read(std::string_view name, std::string_view what, size_t max_bytes) const {
  PLUMB_TRY(check_name(name));
  std::string msg = "read " + (what.empty() ? std::string() : std::string(what) + " ") + path_of(name);
  int fd = ::openat(fd_.get(), std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return io_error(errno, msg);
  return read_fd(fd, msg, max_bytes);
}

Status Dir::write_atomic(std::string_view name, std::string_view data, WriteOptions opts) const {
  PLUMB_TRY(check_name(name));
  const std::string path = path_of(name);
  // A link where the file should be is refused (the rename would replace it, never follow it,
  // but someone planted it: say so).
  auto existing = PLUMB_TRY(stat(name));
  if (existing && S_ISLNK(existing->st_mode)) return io_error(ELOOP, "write " + path);
  // A new file: linked whole (created meanwhile, or no unnamed files here: the rename below).
  if (!existing && PLUMB_TRY(link_unnamed(name, data, opts)).value_or(false)) return {};
  const std::string tmp = opts.locked_tmp.empty() ? std::string(name) + temp_suffix() : std::string(opts.locked_tmp);
  if (!opts.locked_tmp.empty()) PLUMB_TRY(remove(tmp));  // a killed writer's: ours to replace
  int fd = ::openat(fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, opts.mode);
  if (fd < 0) return io_error(errno, "write " + path + " (create " + path_of(tmp) + ")");
  auto abandon = [&](int err, const std::string& what) -> Status {
    if (fd >= 0) ::close(fd);
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    return io_error(err, what);
  };
  if (auto st = write_all(fd, data); !st) return abandon(st.error().sys_errno, "write " + path);
  // The umask applied at open(); the mode asked for is the mode the file gets.
  if (::fchmod(fd, opts.mode) != 0) return abandon(errno, "chmod " + path_of(tmp));
  if (opts.fsync && ::fsync(fd) != 0) return abandon(errno, "fsync " + path_of(tmp));
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return abandon(errno, "write " + path);
  if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), std::string(name).c_str()) != 0) {
    return abandon(errno, "rename " + path_of(tmp) + " to " + path);
  }
  return {};
}

Result<UniqueFd> Dir::open_in_place(std::string_view name, mode_t mode, off_t& size) const {
  const std::string path = path_of(name);
  UniqueFd fd(::openat(fd_.get(), std::string(name).c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode));
  if (fd.get() < 0) return io_error(errno, "write " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno, "write " + path);
  if (!S_ISREG(st.st_mode)) return io_error(EINVAL, "write " + path);
  // The umask's mode of a file just made (or one changed by hand).
  if ((st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) != 0) return io_error(errno, "write " + path);
  size = st.st_size;
  return fd;
}

Status Dir::rewrite(int fd, std::string_view name, std::string_view data, off_t old_size) const {
  // From offset 0, then only the old content's tail beyond the new is cut.
  int err = 0;
  if (auto written = write_all(fd, data, /*at_start=*/true); !written) err = written.error().sys_errno;
  if (err == 0 && old_size > static_cast<off_t>(data.size()) && ::ftruncate(fd, static_cast<off_t>(data.size())) != 0) err = errno;
  if (err != 0) return io_error(err, "write " + path_of(name));
  return {};
}

Status Dir::write_in_place(std::string_view name, std::string_view data, mode_t mode) const {
  PLUMB_TRY(check_name(name));
  off_t size = 0;
  UniqueFd fd = PLUMB_TRY(open_in_place(name, mode, size));
  PLUMB_TRY(rewrite(fd.get(), name, data, size));
  if (::close(fd.release()) != 0) return io_error(errno, "write " + path_of(name));
  return {};
}

Status Dir::write_via_spare(std::string_view name, std::string_view spare, std::string_view data, mode_t mode, bool last,
                            SpareFds* held) const {
  PLUMB_TRY(check_name(name));
  if (held == nullptr) {
    PLUMB_TRY(write_in_place(spare, data, mode));
  } else {
    PLUMB_TRY(check_name(spare));
    if (held->spare.get() < 0) held->spare = PLUMB_TRY(open_in_place(spare, mode, held->spare_bytes));
    if (auto st = rewrite(held->spare.get(), spare, data, held->spare_bytes); !st) {
      *held = SpareFds{};  // what the spare holds now is unknown: open it by name next time
      return st;
    }
    held->spare_bytes = static_cast<off_t>(data.size());
  }
  const std::string to(name);
  const std::string from(spare);
  if (!last && ::renameat2(fd_.get(), from.c_str(), fd_.get(), to.c_str(), RENAME_EXCHANGE) == 0) {
    if (held != nullptr) {
      std::swap(held->named, held->spare);
      std::swap(held->named_bytes, held->spare_bytes);
    }
    return {};
  }
  // The final version, no `name` yet (ENOENT), or no RENAME_EXCHANGE here (EINVAL): a rename,
  // after which the file written is `name` (held as such) and there is no spare.
  SpareFds renamed;
  if (held != nullptr) {
    renamed.named = std::move(held->spare);
    renamed.named_bytes = held->spare_bytes;
    *held = SpareFds{};
  }
  if (::renameat(fd_.get(), from.c_str(), fd_.get(), to.c_str()) != 0) {
    return io_error(errno, "rename " + path_of(spare) + " to " + path_of(name));
  }
  if (held != nullptr) *held = std::move(renamed);
  return {};
}

Status Dir::create_exclusive(std::string_view name, std::string_view data, WriteOptions opts) const {
  PLUMB_TRY(check_name(name));
  const std::string path = path_of(name);
  int fd = ::openat(fd_.get(), std::string(name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, opts.mode);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) return std::unexpected(Error{cni_code::kConflict, err, "create " + path, "it exists already"});
    return io_error(err, "create " + path);
  }
  Status st = write_all(fd, data);
  if (st && ::fchmod(fd, opts.mode) != 0) st = std::unexpected(Error{cni_code::kIo, errno, {}, {}});
  if (st && opts.fsync && ::fsync(fd) != 0) st = std::unexpected(Error{cni_code::kIo, errno, {}, {}});
  if (::close(fd) != 0 && st) st = std::unexpected(Error{cni_code::kIo, errno, {}, {}});
  if (!st) {
    ::unlinkat(fd_.get(), std::string(name).c_str(), 0);
    return io_error(st.error().sys_errno, "write " + path);
  }
  return {};
}

Result<std::optional<bool>> Dir::link_unnamed(std::string_view name, std::string_view data, WriteOptions opts) const {
  const std::string path = path_of(name);
  int fd = ::openat(fd_.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, opts.mode);
  if (fd < 0) {
    // No unnamed files on this filesystem (EOPNOTSUPP; EISDIR on kernels before 3.11).
    if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) return std::optional<bool>{};
    return io_error(errno, "write " + path + " (create an unnamed file in " + path_ + ")");
  }
  UniqueFd owned(fd);
  if (auto st = write_all(fd, data); !st) return io_error(st.error().sys_errno, "write " + path);
  // The umask applied at open(); the mode asked for is the mode the file gets.
  if (::fchmod(fd, opts.mode) != 0) return io_error(errno, "chmod " + path);
  if (opts.fsync && ::fsync(fd) != 0) return io_error(errno, "fsync " + path);
  const std::string n(name);
  if (::linkat(fd, "", fd_.get(), n.c_str(), AT_EMPTY_PATH) == 0) return std::optional<bool>(true);
  int err = errno;
  if (err == ENOENT || err == EPERM) {
    // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the descriptor's /proc link does not.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    if (::linkat(AT_FDCWD, proc.c_str(), fd_.get(), n.c_str(), AT_SYMLINK_FOLLOW) == 0) return std::optional<bool>(true);
    err = errno;
    if (err == ENOENT || err == EPERM) return std::optional<bool>{};  // no /proc either
  }
  if (err == EEXIST) return std::optional<bool>(false);
  return io_error(err, "create " + path);
}

Result<bool> Dir::create_whole(std::string_view name, std::string_view data, WriteOptions opts,
                               std::string_view fallback_tmp) const {
  PLUMB_TRY(check_name(name));
  PLUMB_TRY(check_name(fallback_tmp));
  if (auto linked = PLUMB_TRY(link_unnamed(name, data, opts))) return *linked;
  (void)remove(fallback_tmp);  // the caller's, left by a writer killed before removing it
  PLUMB_TRY(create_exclusive(fallback_tmp, data, opts));
  auto linked = link_new(fallback_tmp, name);
  (void)remove(fallback_tmp);
  return linked;
}

Result<bool> Dir::link_new(std::string_view from, std::string_view to) const {
  PLUMB_TRY(check_name(from));
  PLUMB_TRY(check_name(to));
  if (::linkat(fd_.get(), std::string(from).c_str(), fd_.get(), std::string(to).c_str(), 0) == 0) return true;
  if (errno == EEXIST) return false;
  return io_error(errno, "create " + path_of(to));
}

Result<int> Dir::open_lock(std::string_view name, mode_t mode) const {
  PLUMB_TRY(check_name(name));
  const std::string n(name);
  // Lock files usually exist (they outlive their holders, or were claimed from a pool): opened
  // first, created only when missing.
  for (int attempt = 0;; ++attempt) {
    int fd = ::openat(fd_.get(), n.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EROFS) {
      fd = ::openat(fd_.get(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);  // flock works on a read-only descriptor
      if (fd >= 0) return fd;
      return io_error(errno == ENOENT ? EROFS : errno, "open lock file " + path_of(name));  // why it could not be created
    }
    if (errno != ENOENT) return io_error(errno, "open lock file " + path_of(name));
    fd = ::openat(fd_.get(), n.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
      if (::fchmod(fd, mode) != 0) {  // a new lock file gets the mode asked for, not the umask's
        int err = errno;
        ::close(fd);
        return io_error(err, "chmod lock file " + path_of(name));
      }
      return fd;
    }
    // Created by another process in between (EEXIST): opened on the next turn.
    if (errno != EEXIST || attempt >= 8) return io_error(errno, "open lock file " + path_of(name));
  }
}

Status Dir::remove(std::string_view name) const {
  PLUMB_TRY(check_name(name));
  if (::unlinkat(fd_.get(), std::string(name).c_str(), 0) != 0 && errno != ENOENT) return io_error(errno, "remove " + path_of(name));
  return {};
}

Result<bool> Dir::remove_dir(std::string_view name) const {
  PLUMB_TRY(check_name(name));
  if (::unlinkat(fd_.get(), std::string(name).c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
  if (errno == ENOTEMPTY || errno == EEXIST) return false;
  return io_error(errno, "remove directory " + path_of(name));
}

Status Dir::move(std::string_view name, const Dir& to, std::string_view to_name) const {
  PLUMB_TRY(check_name(name));
  PLUMB_TRY(to.check_name(to_name));
  if (::renameat2(fd_.get(), std::string(name).c_str(), to.fd_.get(), std::string(to_name).c_str(), RENAME_NOREPLACE) != 0) {
    return io_error(errno, "move " + path_of(name) + " to " + to.path_of(to_name));
  }
  return {};
}

Result<std::optional<struct stat>> Dir::stat(std::string_view name) const {
  PLUMB_TRY(check_name(name));
  struct stat st {};
  if (::fstatat(fd_.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return std::optional<struct stat>(st);
  if (errno == ENOENT) return std::optional<struct stat>{};
  return io_error(errno, "stat " + path_of(name));
}

Result<std::vector<Dir::Entry>> Dir::list() const {
  UniqueFd fd(::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));  // a position of its own
  if (fd.get() < 0) return io_error(errno, "list directory " + path_);
  return read_entries(fd.get(), path_);
}

namespace invocations {
namespace {
bool keep = false;
uint64_t number = 0;
}  // namespace

void keep_across(bool on) {
  keep = on;
  if (on) ++number;  // never a number an earlier keeping period checked in
}
bool keeping() { return keep; }
uint64_t current() { return keep ? number : 0; }
void next() {
  if (keep) ++number;
}
}  // namespace invocations

KeptIdentity::KeptIdentity(int fd) : checked_(invocations::current()) {
  struct stat st {};
  if (fd >= 0 && invocations::keeping() && ::fstat(fd, &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    known_ = true;
  }
}

bool KeptIdentity::still_named(int at, const std::string& name) {
  if (checked_ == invocations::current()) return true;
  struct stat st {};
  if (!known_ || ::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_dev != dev_ || st.st_ino != ino_) {
    return false;
  }
  checked_ = invocations::current();
  return true;
}

}  // namespace plumb
