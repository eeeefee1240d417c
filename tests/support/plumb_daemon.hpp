// `plumb daemon` as tests run it (tests/cni-entry/daemon/): started in the test's node namespace
// with its socket, usage log and stderr in a directory of its own, its workers, the invocations it
// logged, and a raw request on its socket (what plumb-shim sends, or anything else).
#pragma once

#include <doctest/doctest.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cni-entry/daemon/wire.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/unix_socket.hpp"

namespace plumb::test {

/// `plumb daemon` started in the test's node namespace, its socket and usage log in a directory
/// of their own (outside the node's scratch directory, which snapshots compare).
struct Daemon {
  TempDir dir;
  std::string socket = dir.path + "/plumb.sock";
  std::string usage = dir.path + "/usage";
  std::string log = dir.path + "/log";
  pid_t pid = -1;

  explicit Daemon(const std::vector<std::string>& args = {}, const std::string& binary = plumb_binary(),
                  const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> argv = {binary, "daemon", "--socket", socket, "--usage-log", usage};
    argv.insert(argv.end(), args.begin(), args.end());
    pid = start_child(argv, env, log);
    REQUIRE(pid > 0);
    for (int i = 0; i < 500 && !std::filesystem::exists(socket); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE_MESSAGE(std::filesystem::exists(socket), read_file(log));
    // The socket appears before the first workers are forked: every case starts with them.
    REQUIRE(eventually([&] { return !workers().empty(); }));
  }
  ~Daemon() { stop_child(pid, std::chrono::milliseconds(5000)); }
  /// After a signal: waits (bounded) for the daemon to end and reaps it; true when it exited 0.
  [[nodiscard]] bool exits_cleanly() {
    int status = -1;
    if (!eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; })) return false;
    pid = -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// The daemon's live children (its workers), by pid.
  [[nodiscard]] std::set<pid_t> workers() const {
    std::set<pid_t> out;
    DIR* d = ::opendir("/proc");
    while (dirent* e = ::readdir(d)) {
      const std::string stat = read_file(std::string("/proc/") + e->d_name + "/stat");
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(stat.c_str() + close + 2, "%c %d", &state, &ppid) == 2 && ppid == pid && state != 'Z') {
        out.insert(std::stoi(e->d_name));
      }
    }
    ::closedir(d);
    return out;
  }
  /// The pid of each invocation the daemon logged, in order, once it logged `count` of them (or
  /// the bound passed: the caller's check of the count fails then). The worker answers its shim
  /// right after telling the daemon, so a shim's end may come before the daemon's line.
  [[nodiscard]] std::vector<pid_t> served_by(size_t count) const {
    (void)eventually([&] { return lines_of(read_file(usage)).size() >= count; });
    std::vector<pid_t> out;
    for (const auto& line : lines_of(read_file(usage))) out.push_back(std::stoi(line.substr(4)));
    return out;
  }
};

/// Sends `body` as one message on a new connection to the daemon's `socket` (with /dev/null as
/// the three descriptors when `with_stdio`) and returns the status it answers (REQUIRE: one).
inline daemon_wire::Status daemon_request(const std::string& socket, const std::string& body, bool with_stdio = true) {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const sockaddr_un addr = unix_address(socket);
  REQUIRE(::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int fds[3] = {null, null, null};
  if (with_stdio) REQUIRE(daemon_wire::send_with_fds(s, body.data(), body.size(), fds, 3));
  else REQUIRE(::send(s, body.data(), body.size(), 0) == static_cast<ssize_t>(body.size()));
  daemon_wire::Status st{};
  const ssize_t n = ::recv(s, &st, sizeof st, 0);
  ::close(null);
  ::close(s);
  REQUIRE(n == static_cast<ssize_t>(sizeof st));
  return st;
}

}  // namespace plumb::test
