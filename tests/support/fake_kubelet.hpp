// Drives tests/support/fake_kubelet.py (kubelet's pod-resources API v1 over gRPC on a unix socket,
// served by Debian's python3-grpcio: [fake kubelet]) from a test: a child process started in the
// test's namespaces, stopped by pid. What it answers is a JSON file the test writes (see the
// script's docstring); every call it gets is logged.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/unix_socket.hpp"

namespace plumb::test {

class FakeKubelet {
 public:
  /// Starts the fake under `dir` (created) answering from `state_json`; waits up to 20 s until its
  /// socket accepts a connection (REQUIRE).
  explicit FakeKubelet(std::string dir, const std::string& state_json = R"({"pods":[]})") : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    set_state(state_json);
    start();
  }
  ~FakeKubelet() { stop(); }
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  std::string socket() const { return dir_ + "/kubelet.sock"; }
  /// Replaces what it answers (read on every call).
  void set_state(const std::string& json) const { write_file(dir_ + "/state.json", json); }
  /// The calls so far: "Get <ns>/<name>", "List".
  std::vector<std::string> calls() const { return lines_of(read_file(dir_ + "/calls.log")); }
  void clear_calls() const { std::filesystem::remove(dir_ + "/calls.log"); }

  /// One pod's allocation as the state file spells it: `devices` are (resourceName, [ids]) of one container.
  static std::string pod(const std::string& ns, const std::string& name,
                         const std::vector<std::pair<std::string, std::vector<std::string>>>& devices) {
    std::string d;
    for (auto& [res, ids] : devices) {
      std::string list;
      for (auto& id : ids) list += (list.empty() ? "\"" : ",\"") + id + "\"";
      d += (d.empty() ? "" : ",") + std::string(R"({"resourceName":")") + res + R"(","deviceIds":[)" + list + "]}";
    }
    return R"({"namespace":")" + ns + R"(","name":")" + name + R"(","containers":[{"name":"c1","devices":[)" + d + "]}]}";
  }

  /// Kills it (SIGTERM, then SIGKILL) and reaps it. Idempotent.
  void stop() { stop_child(pid_, std::chrono::milliseconds(2000)); }

 private:
  void start() {
    std::filesystem::remove(socket());
    std::string script = std::string(PLUMB_FIXTURES) + "/../support/fake_kubelet.py";
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      int log = ::open((dir_ + "/kubelet.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      // Debian's interpreter: python3-grpcio and python3-protobuf are Debian packages.
      ::execl("/usr/bin/python3", "python3", script.c_str(), "--proto-dir", PLUMB_PODRESOURCES_PY_DIR, "--socket",
              socket().c_str(), "--state", (dir_ + "/state.json").c_str(), "--log", (dir_ + "/calls.log").c_str(),
              nullptr);
      ::_exit(127);
    }
    // Up to 60 s: Python and grpcio start in a fraction of that on a host, but many times slower
    // in the full-kernel tier's emulated guest on a loaded machine.
    for (int i = 0; i < 1200; ++i) {
      if (accepts()) return;
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("the fake kubelet exited at start: " << read_file(dir_ + "/kubelet.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("the fake kubelet did not start: " << read_file(dir_ + "/kubelet.log"));
  }

  /// Whether the socket takes a connection. Its file alone is not enough: the server binds it
  /// before it listens, and a connection in between is refused.
  bool accepts() const {
    const sockaddr_un sa = unix_address(socket());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }

  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace plumb::test
