// Counting the kernel's events of one kind (perf_event_open(2) on a tracepoint, e.g. the
// syscalls:sys_enter_<name> tracepoint) for tests that assert how many file operations or
// netlink requests a path takes: exact counts of a thread (and, when asked, of what it starts),
// never timings.
#pragma once

#include <doctest/doctest.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

namespace plumb::test {

/// The id of tracepoint `event` ("syscalls/sys_enter_openat") from tracefs; tracefs is mounted on
/// /sys/kernel/tracing when nothing is there (the tests run in a private mount namespace).
/// -1 when the kernel has no such tracepoint.
inline long tracepoint_id(const std::string& event) {
  const std::string path = "/events/" + event + "/id";
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (const char* base : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      long id = -1;
      if (std::ifstream in(base + path); in >> id) return id;
    }
    if (attempt == 0) (void)::mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr);
  }
  return -1;
}

/// Whose events a count takes.
enum class Counted {
  kThread,             ///< the calling thread's only
  kThreadAndChildren,  ///< also those of the threads and processes it starts while counting (a
                       ///< binary a test runs: fork, exec, its own children), each until it exits
};

/// How many times tracepoint `event` ("sock/sock_send_length") fires for `who` while `fn` runs,
/// counting only the firings `filter` (the tracepoint's filter syntax over its format's fields;
/// "" = all) accepts. Children are counted once they exited (a test's run() waits for them).
/// REQUIREs the counter (root, a kernel with the tracepoint).
inline long count_tracepoint(const std::string& event, const std::string& filter, Counted who,
                             const std::function<void()>& fn) {
  const long id = tracepoint_id(event);
  REQUIRE_MESSAGE(id >= 0, "no tracepoint " << event);
  perf_event_attr attr{};
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof attr;
  attr.config = static_cast<uint64_t>(id);
  attr.disabled = 1;
  attr.inherit = who == Counted::kThreadAndChildren ? 1 : 0;
  const int fd = static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  REQUIRE_MESSAGE(fd >= 0, "perf_event_open of " << event);
  const bool filtered = filter.empty() || ::ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter.c_str()) == 0;
  if (!filtered) ::close(fd);
  REQUIRE_MESSAGE(filtered, "filter \"" << filter << "\" on " << event);
  ::ioctl(fd, PERF_EVENT_IOC_RESET, 0);
  ::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  fn();
  ::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  uint64_t n = 0;
  const bool read_ok = ::read(fd, &n, sizeof n) == static_cast<ssize_t>(sizeof n);
  ::close(fd);
  REQUIRE(read_ok);
  return static_cast<long>(n);
}

/// How many times the calling thread enters system call `name` ("openat") while `fn` runs.
inline long count_syscalls(const std::string& name, const std::function<void()>& fn) {
  return count_tracepoint("syscalls/sys_enter_" + name, "", Counted::kThread, fn);
}

/// How many rtnetlink requests (sends on NETLINK_ROUTE sockets, any namespace's: a sendto or
/// sendmsg each, however many messages it carries) the calling thread and what it starts make
/// while `fn` runs (sock:sock_send_length on AF_NETLINK sockets of protocol NETLINK_ROUTE).
inline long count_rtnetlink_sends(const std::function<void()>& fn) {
  return count_tracepoint("sock/sock_send_length", "family == 16 && protocol == 0", Counted::kThreadAndChildren, fn);
}

}  // namespace plumb::test
