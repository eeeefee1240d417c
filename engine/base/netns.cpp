#include "engine/base/netns.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace plumb::netns {
namespace {

/// Checks that `fd` refers to a network namespace: NS_GET_NSTYPE (Linux 4.11+) first; when the
/// ioctl is not supported, any nsfs file (NSFS_MAGIC) is accepted.
Status check_netns(int fd, const std::string& what) {
  int type = ioctl(fd, NS_GET_NSTYPE);
  if (type >= 0) {
    if (type != CLONE_NEWNET) {
      return fail_errno(EINVAL, what + " is a namespace but not a network namespace");
    }
    return {};
  }
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return fail_errno(errno, "fstatfs " + what);
  if (static_cast<unsigned long>(fs.f_type) != static_cast<unsigned long>(NSFS_MAGIC)) {
    return fail_errno(EINVAL, what + " is not a network namespace");
  }
  return {};
}

}  // namespace

Result<Netns> Netns::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail_errno(errno, "open network namespace " + path);
  Netns ns(fd, path);
  PLUMB_TRY(check_netns(fd, path));
  return ns;
}

Result<Netns> Netns::current() { return open("/proc/thread-self/ns/net"); }

Result<Netns> Netns::from_fd(int fd) {
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  std::string what = "network namespace fd " + std::to_string(fd);
  if (dup < 0) return fail_errno(errno, "duplicate " + what);
  Netns ns(dup, "/proc/self/fd/" + std::to_string(fd));
  PLUMB_TRY(check_netns(dup, what));
  return ns;
}

Netns::Netns(Netns&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

Netns& Netns::operator=(Netns&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

Netns::~Netns() {
  if (fd_ >= 0) ::close(fd_);
}

unsigned long Netns::inode() const {
  struct stat st {};
  if (fd_ < 0 || fstat(fd_, &st) != 0) return 0;
  return static_cast<unsigned long>(st.st_ino);
}

Result<Guard> Guard::enter(const Netns& target) {
  Netns original = PLUMB_TRY(Netns::current());
  if (setns(target.fd(), CLONE_NEWNET) != 0) {
    return fail_errno(errno, "enter network namespace " + target.path());
  }
  return Guard(std::move(original));
}

Guard::Guard(Guard&& o) noexcept : original_(std::move(o.original_)), active_(std::exchange(o.active_, false)) {}

Guard::~Guard() {
  if (!active_) return;
  if (setns(original_.fd(), CLONE_NEWNET) != 0) {
    // Continuing in the wrong namespace would change the wrong node: stop here.
    std::fprintf(stderr, "plumb: cannot return to network namespace %s: %s\n", original_.path().c_str(),
                 std::strerror(errno));
    std::abort();
  }
}

}  // namespace plumb::netns
