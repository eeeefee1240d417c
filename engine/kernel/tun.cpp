#include "engine/kernel/tun.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/kernel/ifname.hpp"

namespace plumb::tun {
namespace {

/// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status tun_ioctl(int fd, unsigned long request, unsigned long arg, const std::string& what) {
  if (::ioctl(fd, request, arg) < 0) return fail_errno(errno, what);
  return {};
}

std::optional<uint32_t> parse_id(const char* s) {
  if (std::strcmp(s, "-") == 0) return std::nullopt;
  return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
}

}  // namespace

uint16_t tap_flags(const TapSpec& spec) {
  auto flags = static_cast<uint16_t>(IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
  if (spec.multi_queue) flags = static_cast<uint16_t>(flags | IFF_MULTI_QUEUE);
  return flags;
}

Status create_tap(const TapSpec& spec) {
  const std::string what = "create tap " + spec.name;
  if (!link::valid_ifname(spec.name)) return fail(cni_code::kInvalidConfig, what + ": invalid name");
  Fd tun{::open("/dev/net/tun", O_RDWR | O_CLOEXEC)};
  if (tun.fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENODEV || err == ENXIO) {
      return fail(cni_code::kKernelFeature, what + ": /dev/net/tun is not available (the kernel lacks the tun driver)",
                  std::strerror(err));
    }
    return fail_errno(err, what + ": open /dev/net/tun");
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, spec.name.data(), spec.name.size());
  // IFF_TUN_EXCL: an existing device of that name is an error (EBUSY), never attached to.
  ifr.ifr_flags = static_cast<short>(tap_flags(spec) | IFF_TUN_EXCL);
  if (::ioctl(tun.fd, TUNSETIFF, &ifr) < 0) {
    int err = errno;
    if (err == EBUSY || err == EEXIST) return fail(cni_code::kConflict, what + ": the name is taken", std::strerror(err));
    return fail_errno(err, what + ": TUNSETIFF");
  }
  // Until TUNSETPERSIST succeeds, closing the descriptor destroys the device: nothing is left.
  if (spec.owner) PLUMB_TRY(tun_ioctl(tun.fd, TUNSETOWNER, *spec.owner, what + ": TUNSETOWNER " + std::to_string(*spec.owner)));
  if (spec.group) PLUMB_TRY(tun_ioctl(tun.fd, TUNSETGROUP, *spec.group, what + ": TUNSETGROUP " + std::to_string(*spec.group)));
  return tun_ioctl(tun.fd, TUNSETPERSIST, 1, what + ": TUNSETPERSIST");
}

bool selinux_enabled(const std::string& sysfs_root) {
  struct stat st {};
  return ::stat((sysfs_root + "/fs/selinux/enforce").c_str(), &st) == 0;
}

Status create_tap_labelled(const TapSpec& spec, const std::string& context) {
  const std::string what = "create tap " + spec.name + " under SELinux context \"" + context + "\"";
  std::vector<std::string> args = {"plumb", kHelperArg, spec.name, spec.multi_queue ? "1" : "0",
                                   spec.owner ? std::to_string(*spec.owner) : "-", spec.group ? std::to_string(*spec.group) : "-"};
  // Everything the child needs is built before fork(): it only makes system calls.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return fail_errno(errno, what + ": pipe");
  Fd rd{pipe_fds[0]};
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fds[1]);
    return fail_errno(errno, what + ": fork");
  }
  if (pid == 0) {
    // The child: its stderr is the pipe; the exec context applies to the next execve only.
    ::dup2(pipe_fds[1], 2);
    int fd = ::open("/proc/thread-self/attr/exec", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, context.data(), context.size()) != static_cast<ssize_t>(context.size())) {
      std::fprintf(stderr, "the kernel refused the SELinux exec context: %s", std::strerror(errno));
      ::_exit(1);
    }
    ::close(fd);
    ::execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "execute /proc/self/exe: %s", std::strerror(errno));
    ::_exit(1);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(rd.fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    message.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return fail(cni_code::kKernel, what + ": " + (message.empty() ? std::string("the helper failed") : message));
}

int tap_helper_main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s %s NAME MULTIQUEUE OWNER GROUP", argv[0], kHelperArg);
    return 2;
  }
  TapSpec spec{argv[2], std::strcmp(argv[3], "1") == 0, parse_id(argv[4]), parse_id(argv[5])};
  auto st = create_tap(spec);
  if (!st) {
    std::fprintf(stderr, "%s", st.error().text().c_str());
    return 1;
  }
  return 0;
}

}  // namespace plumb::tun
