// Small pieces the tests' helper servers share (kube_api_server.hpp, fake_kubelet.hpp, the DHCP
// server and daemon of tests/ipam/delegated_test.cpp): starting and stopping a child by its pid,
// a log file as lines, and waiting for a condition.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/private_node.hpp"

namespace plumb::test {

/// Starts argv (argv[0] an absolute path) in the background with `env` plus PATH as its whole
/// environment, stdout and stderr appended to `log`; returns its pid (-1 if fork failed).
inline pid_t start_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                         const std::string& log) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  exec_child(argv, env);
}

/// SIGTERM to `pid`, up to `grace` for it to exit, then SIGKILL; reaps it and sets pid to -1.
/// Nothing when pid <= 0.
inline void stop_child(pid_t& pid, std::chrono::milliseconds grace = std::chrono::milliseconds(1000)) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto end = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

/// Stops (stop_child) every child it names when it goes out of scope, so a failed REQUIRE leaves
/// none running; a pid the test stopped itself (-1) is skipped.
struct StopOnExit {
  std::vector<pid_t*> pids;
  ~StopOnExit() {
    for (pid_t* p : pids) stop_child(*p);
  }
};

/// Polls `cond` every 50 ms for up to 10 s; whether it held.
inline bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 200; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

/// The non-empty lines of `text`.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    if (nl > pos) out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace plumb::test
