// Concurrent "nodes" for the cluster IPAM's tests (tests/ipam/cluster_etcd_concurrency_test.cpp,
// tests/ipam/cluster_kube_concurrency_test.cpp): each node is a forked process that waits for one
// start gun, runs its ADDs through a callback the test gives (the datastore-specific part), and
// writes what it got to a file; the parent reaps every node and reads the files back, and checks
// that no address went to two containers. Reading the datastore back stays in each test file.
//
// A node's file, one line each: "<containerID> <addr>..." per ADD that succeeded, "ERR <text>"
// when setting up or an ADD failed (the node then stops), and "STATS <requests> <conflicts>" last.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <expected>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace plumb::test {

/// Seconds (fractional) from `t` to now, on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// A start gun for forked nodes: a pipe whose write end only the parent keeps open. Children call
/// wait_in_child() and block until fire() (or the gun's destruction) closes it: EOF releases them
/// all at once.
struct Gun {
  int fds[2] = {-1, -1};
  Gun() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  Gun(const Gun&) = delete;
  Gun& operator=(const Gun&) = delete;
  /// Parent: releases every node waiting on the gun.
  void fire() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
  /// Child: drops its copy of the write end, then blocks until EOF.
  void wait_in_child() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
    char b;
    while (::read(fds[0], &b, 1) > 0) {
    }
  }
  ~Gun() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
};

/// One ADD's outcome in a node: the addresses given ("<addr>/<len>", in the result's order) and
/// the datastore requests and write conflicts it took (0 where a datastore does not count them);
/// or the error's text.
struct NodeAdd {
  std::vector<std::string> addrs;
  uint64_t requests = 0;
  int conflicts = 0;
};
using NodeAddResult = std::expected<NodeAdd, std::string>;
/// Runs ADD number `j` (from 0) for container `cid` in the node process.
using NodeAddFn = std::function<NodeAddResult(const std::string& cid, int j)>;

/// What one node does, run in the node process after the gun: `start` builds the node's allocator
/// (its own datastore client) and returns the ADD function, or an error's text; then `count` ADDs,
/// ADD j for the container `container(j)`.
struct NodePlan {
  int count = 0;
  std::function<std::string(int j)> container;
  std::function<std::expected<NodeAddFn, std::string>()> start;
};

/// What the nodes of one run wrote, read back by NodeFleet::collect.
struct NodeRun {
  std::map<std::string, std::vector<std::string>> by_container;  // container ID -> its addresses
  std::vector<std::string> errors;                                // "ERR ..." lines, failed exits
  uint64_t requests = 0;                                          // summed over the nodes' STATS
  int conflicts = 0;
};

/// In the node process: runs `plan`, writing its lines to `out`; exits 0 when every ADD
/// succeeded, 1 when an ADD failed, 2 when `start` failed, 3 on an exception. Never returns.
[[noreturn]] inline void run_node(const NodePlan& plan, const std::string& out) {
  std::ofstream f(out);
  int code = 0;
  try {
    auto add = plan.start();
    if (!add) {
      f << "ERR " << add.error() << "\n";
      code = 2;
    }
    uint64_t requests = 0;
    int conflicts = 0;
    for (int j = 0; code == 0 && j < plan.count; ++j) {
      std::string cid = plan.container(j);
      auto r = (*add)(cid, j);
      if (!r) {
        f << "ERR " << cid << ": " << r.error() << "\n";
        code = 1;
        break;
      }
      requests += r->requests;
      conflicts += r->conflicts;
      f << cid;
      for (auto& a : r->addrs) f << " " << a;
      f << "\n";
    }
    if (code == 0) f << "STATS " << requests << " " << conflicts << "\n";
  } catch (...) {  // a doctest assertion or anything else: never back into the parent's cases
    f << "ERR exception in the node process\n";
    code = 3;
  }
  f.close();
  ::_exit(code);
}

/// Reads one node's file into `run` (see the file comment for its lines).
inline void read_node_file(const std::string& path, NodeRun& run) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("ERR", 0) == 0) {
      run.errors.push_back(line);
      continue;
    }
    std::istringstream ss(line);
    std::string first, a;
    ss >> first;
    if (first == "STATS") {
      uint64_t requests = 0;
      int conflicts = 0;
      ss >> requests >> conflicts;
      run.requests += requests;
      run.conflicts += conflicts;
      continue;
    }
    while (ss >> a) run.by_container[first].push_back(a);
  }
}

/// Node processes released by one gun. spawn() forks a node (it waits for fire()); collect()
/// reaps them all and reads what they wrote. Nodes not collected (a failed REQUIRE in between)
/// are killed and reaped when the fleet goes.
class NodeFleet {
 public:
  NodeFleet() = default;
  NodeFleet(const NodeFleet&) = delete;
  NodeFleet& operator=(const NodeFleet&) = delete;
  ~NodeFleet() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  /// Forks a node that runs `plan` once the gun fires, writing its lines to the file `out`.
  void spawn(const std::string& out, const NodePlan& plan) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      gun_.wait_in_child();
      run_node(plan, out);
    }
    pids_.push_back(pid);
    outs_.push_back(out);
  }

  /// Releases every node spawned so far.
  void fire() { gun_.fire(); }

  /// Waits for every node (fire() first), then reads their files in spawn order; a node that
  /// did not exit 0 adds "node process <i> exited with status <wait status>" to the errors.
  NodeRun collect() {
    NodeRun run;
    for (size_t i = 0; i < pids_.size(); ++i) {
      int status = 0;
      while (::waitpid(pids_[i], &status, 0) < 0 && errno == EINTR) {
      }
      read_node_file(outs_[i], run);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        run.errors.push_back("node process " + std::to_string(i) + " exited with status " + std::to_string(status));
      }
    }
    pids_.clear();
    return run;
  }

 private:
  Gun gun_;
  std::vector<pid_t> pids_;
  std::vector<std::string> outs_;
};

/// Checks (CHECK, so every duplicate is reported) that no address (prefix length dropped) went to
/// two containers of `run`, and that `expect` addresses were given in all. Returns each address's
/// holder (bare address -> container ID) for the datastore's read-back.
inline std::map<std::string, std::string> check_unique_addresses(const NodeRun& run, size_t expect) {
  std::map<std::string, std::string> holder;
  size_t given = 0;
  for (auto& [cid, addrs] : run.by_container) {
    for (auto& a : addrs) {
      std::string bare = a.substr(0, a.find('/'));
      ++given;
      auto [it, fresh] = holder.emplace(bare, cid);
      CHECK_MESSAGE(fresh, bare, " given to both ", it->second, " and ", cid);
    }
  }
  CHECK(given == expect);
  CHECK(holder.size() == expect);
  return holder;
}

}  // namespace plumb::test
