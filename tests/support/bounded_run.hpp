// Running the plumb binary on hostile input: a time limit (SIGKILL after it), a memory limit
// (RLIMIT_AS; not under AddressSanitizer, whose shadow memory needs the address space), stdin
// written while stdout and stderr are read, so a child that stops reading or floods its output
// never blocks the test, and the outcome told apart: exit code, signal, or killed at the limit.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "tests/support/private_node.hpp"

namespace plumb::test {

/// How one bounded run ended.
struct BoundedProc {
  int exit_code = -1;    ///< the exit status when it exited
  int signal = 0;        ///< the signal that ended it, 0 when it exited
  bool timed_out = false;
  std::string out;
  std::string err;

  /// Exited by itself (no signal, no time-out).
  [[nodiscard]] bool exited() const { return signal == 0 && !timed_out; }
  /// The CNI error it printed: {"code", "msg"}; code -1 when stdout is not an error object.
  [[nodiscard]] std::pair<int, std::string> cni_error() const {
    rapidjson::Document d;
    d.Parse(out.c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("code") || !d["code"].IsInt() || !d.HasMember("msg") || !d["msg"].IsString()) {
      return {-1, ""};
    }
    return {d["code"].GetInt(), d["msg"].GetString()};
  }
};

struct Bounds {
  /// A hang ends at the limit, whatever it is; under AddressSanitizer a 1 MB hostile input takes
  /// seconds to parse, and much longer on a loaded 2-core machine.
#ifdef PLUMB_SANITIZED
  double seconds = 120;
#else
  double seconds = 30;
#endif
  size_t memory_bytes = size_t{1} << 30;  ///< RLIMIT_AS (not under ASan)
  mode_t umask = 022;
  /// stdin a pipe kept open and never written (as a person's terminal): `input` is not sent, and
  /// a child that reads stdin waits until the limit.
  bool stdin_open = false;
};

inline BoundedProc run_bounded(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                               const std::string& input, Bounds bounds = {}) {
  int in[2], out[2], err[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
#ifndef PLUMB_SANITIZED  // GCC and clang alike (clang 16 does not define __SANITIZE_ADDRESS__)
    rlimit as{bounds.memory_bytes, bounds.memory_bytes};
    ::setrlimit(RLIMIT_AS, &as);
#endif
    ::umask(bounds.umask);
    exec_child(argv, env);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::signal(SIGPIPE, SIG_IGN);  // a child that exits before reading all its input
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  BoundedProc p;
  size_t written = 0;
  int to_child = in[1];
  const int held_open = bounds.stdin_open ? in[1] : -1;
  if (input.empty() || bounds.stdin_open) {
    if (!bounds.stdin_open) ::close(to_child);
    to_child = -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(bounds.seconds * 1000));
  int open_outputs = 2;
  while (open_outputs > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      p.timed_out = true;
      break;
    }
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {to_child, POLLOUT, 0}};
    if (::poll(fds, to_child >= 0 ? 3 : 2, static_cast<int>(left)) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? p.out : p.err).append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        ::close(fds[i].fd);
        (i == 0 ? out[0] : err[0]) = -1;
        --open_outputs;
      }
    }
    if (to_child >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(to_child, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // EPIPE: it stopped reading
      if (written == input.size()) {
        ::close(to_child);
        to_child = -1;
      }
    }
  }
  for (int fd : {out[0], err[0], to_child, held_open}) {
    if (fd >= 0) ::close(fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    p.signal = WTERMSIG(status);
  } else {
    p.exit_code = WEXITSTATUS(status);
  }
  return p;
}

}  // namespace plumb::test
