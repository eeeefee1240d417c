// Counting the calling thread's system calls of one kind (perf_event_open(2) on the kernel's
// syscalls:sys_enter_<name> tracepoint), for tests that assert how many file operations a path
// takes: exact counts of one thread, never timings.
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

/// The tracepoint id of system call `name` ("openat") from tracefs; tracefs is mounted on
/// /sys/kernel/tracing when nothing is there (the tests run in a private mount namespace).
/// -1 when the kernel has no such tracepoint.
inline long syscall_tracepoint_id(const std::string& name) {
  const std::string event = "/events/syscalls/sys_enter_" + name + "/id";
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (const char* base : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      long id = -1;
      if (std::ifstream in(base + event); in >> id) return id;
    }
    if (attempt == 0) (void)::mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr);
  }
  return -1;
}

/// How many times the calling thread enters system call `name` while `fn` runs. REQUIREs the
/// counter (root, a kernel with syscall tracepoints).
inline long count_syscalls(const std::string& name, const std::function<void()>& fn) {
  const long id = syscall_tracepoint_id(name);
  REQUIRE_MESSAGE(id >= 0, "no tracepoint syscalls:sys_enter_" << name);
  perf_event_attr attr{};
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof attr;
  attr.config = static_cast<uint64_t>(id);
  attr.disabled = 1;
  const int fd = static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  REQUIRE_MESSAGE(fd >= 0, "perf_event_open of syscalls:sys_enter_" << name);
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

}  // namespace plumb::test
