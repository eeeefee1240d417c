// Test support for privileged integration tests. Nothing here touches the machine's own network
// namespace: integration_main() moves the whole test process into a private network + mount
// namespace before any test runs, and each test case builds a fresh "node" namespace (Node).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace plumb::test {

/// Moves the calling process (single-threaded, at start of main) into new network and mount
/// namespaces, makes all mounts private, and mounts a tmpfs on /run/netns. Aborts on failure:
/// a privileged test must never run in the host's namespaces.
void enter_private_root();

/// Output of a child process.
struct Proc {
  int exit_code = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

/// In a forked child: executes argv (looked up in PATH) with `env` as its whole environment plus
/// PATH; exits 127 when it cannot.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

/// Runs argv with `env` as its whole environment (plus PATH), feeding `input` on stdin.
Proc run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
         const std::string& input = {});
/// Runs a shell command line (/bin/sh -c) and returns its output.
Proc sh(const std::string& cmdline);
/// Runs `ip -j <args>` and parses its JSON output; fails the test (CHECK) on error.
rapidjson::Document ip_json(const std::string& args);

/// A fresh node: a new network namespace for the test process (the old one is released), lo up,
/// sysfs remounted so /sys/class/net shows this namespace, and a private scratch directory.
/// Pods are named network namespaces under /run/netns (the private tmpfs).
class Node {
 public:
  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Scratch directory for this case (state dir, store, IPAM data).
  const std::string& dir() const { return dir_; }
  /// Creates /run/netns/<name> with lo up; returns its path.
  std::string add_netns(const std::string& name);
  /// Removes /run/netns/<name> (the namespace dies with its last reference).
  void del_netns(const std::string& name);

  /// Runs the plumb binary as a runtime would: CNI_* variables from `env`, config on stdin.
  Proc plumb(const std::map<std::string, std::string>& env, const std::string& config) const;

 private:
  std::string dir_;
  std::vector<std::string> netns_;
};

/// A fresh bpffs instance mounted on <node.dir()>/bpf for one test case (unmounted on
/// destruction): point plumb's bpffsDir below it so BPF pins live and die with the case.
class PrivateBpffs {
 public:
  explicit PrivateBpffs(const Node& node);
  ~PrivateBpffs();
  PrivateBpffs(const PrivateBpffs&) = delete;
  PrivateBpffs& operator=(const PrivateBpffs&) = delete;
  /// The mount point.
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

/// Path of the built plumb binary and the fixtures directory.
const char* plumb_binary();
/// The test build's plumb with a journal fault hook (PLUMB_FAULT_AFTER_STEP=N: SIGKILL after the
/// N-th persisted intent).
const char* plumb_faulty_binary();
/// The built plumb-shim (cni-entry/shim/), beside plumb_binary().
const char* plumb_shim_binary();
const char* fixtures_dir();

}  // namespace plumb::test
