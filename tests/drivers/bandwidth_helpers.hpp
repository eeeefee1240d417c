// Helpers of the bandwidth plugin's tests (tests/drivers/bandwidth_test.cpp): the limits and
// addresses of its node, iperf3 transfers measured on the wire (see the test file's comment for
// what is measured and the band it must hold), the conflist with a bandwidth runtimeConfig, and
// independent read-backs: plumb's tc filters (`tc -j`), the pinned state map (bpftool), the
// host's bpffs seen through the launching process, and the host veth of a CNI result.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "tests/support/pod_fixture.hpp"

namespace plumb::test::bandwidth {

using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

inline constexpr uint64_t kLimit = 50'000'000;          // bits per second, both directions
inline constexpr uint64_t kBurst = 1'000'000;           // bits (125 kB): 20 ms at the limit
inline constexpr int kPort = 5201;                      // the iperf3 server's TCP port
inline constexpr const char* kGateway = "203.0.113.1";  // the bridge's address, the iperf3 server's

/// The host's /sys/fs/bpf as the process that launched the test sees it (it did not enter our
/// private mount namespace), recursively.
inline std::set<std::string> host_bpffs() {
  std::string root = "/proc/" + std::to_string(getppid()) + "/root/sys/fs/bpf";
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    out.insert(it->path().string().substr(root.size()));
  }
  REQUIRE_FALSE(ec);
  return out;
}

/// The mount namespace of process `pid` ("self" for this one) as its /proc link reads
/// ("mnt:[<inode>]"); "" when unreadable.
inline std::string mount_ns(const std::string& pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + pid + "/ns/mnt", ec).string();
}

/// Every path under a directory, relative to it.
inline std::set<std::string> tree(const std::string& dir) {
  std::set<std::string> out;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) out.insert(e.path().string().substr(dir.size() + 1));
  return out;
}

/// An iperf3 server in the node namespace, bound to one address; stopped by pid.
class Iperf3Server {
 public:
  Iperf3Server(const std::string& addr, int port) {
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      FILE* null = std::fopen("/dev/null", "w");
      if (null != nullptr) {
        dup2(fileno(null), 1);
        dup2(fileno(null), 2);
      }
      std::string p = std::to_string(port);
      execlp("iperf3", "iperf3", "-s", "-B", addr.c_str(), "-p", p.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait (bounded) until it listens: /proc/net/tcp of this (the node's) namespace, state 0A.
    char port_hex[8];
    std::snprintf(port_hex, sizeof port_hex, ":%04X", port);
    for (int i = 0; i < 100 && !listening_; ++i) {
      std::ifstream f("/proc/net/tcp");
      std::string line;
      while (std::getline(f, line)) {
        std::istringstream ls(line);
        std::string sl, local, remote, st;
        ls >> sl >> local >> remote >> st;
        if (local.size() > 5 && local.substr(local.size() - 5) == port_hex && st == "0A") listening_ = true;
      }
      if (!listening_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(listening_);
  }
  ~Iperf3Server() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Iperf3Server(const Iperf3Server&) = delete;
  Iperf3Server& operator=(const Iperf3Server&) = delete;

 private:
  pid_t pid_ = -1;
  bool listening_ = false;
};

/// One bounded TCP transfer from the pod namespace `ns` to the server (reverse: server to pod):
/// 1 s of warm-up excluded, then 3 s measured. Returns the rate on the wire in bit/s, from the
/// receiver's goodput.
inline double transfer_wire_bps(const std::string& ns, bool reverse) {
  std::string cmd = "timeout -k 5 30 ip netns exec " + ns + " iperf3 -c " + kGateway + " -p " + std::to_string(kPort) +
                    " -O 1 -t 3 -J" + (reverse ? " -R" : "");
  Proc p = sh(cmd);
  INFO(cmd, " -> ", p.exit_code, " ", p.err, p.out.substr(0, 2000));
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  double goodput = d["end"]["sum_received"]["bits_per_second"].GetDouble();
  int mss = d["start"]["tcp_mss_default"].GetInt();
  REQUIRE(mss > 500);
  REQUIRE(mss <= 1460);
  return goodput * (1500.0 + 14.0) / mss;
}

/// Up to 3 samples of one direction, stopping at the first inside ±10% (see the file comment).
inline std::vector<double> measure_limited(const std::string& ns, bool reverse) {
  std::vector<double> samples;
  for (int i = 0; i < 3; ++i) {
    samples.push_back(transfer_wire_bps(ns, reverse));
    double s = samples.back();
    if (s >= 0.9 * kLimit && s <= 1.1 * kLimit) break;
  }
  return samples;
}

/// The conflist of the tests' network: a bridge "plumb0" (gateway 203.0.113.1, host-local
/// addresses of 203.0.113.0/24 under fx's IPAM directory) chained with bandwidth.
inline std::string conflist(const PodFixture& fx) {
  return R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
    {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true,
     "capabilities": {"ips": true, "mac": true},
     "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "203.0.113.0/24"}]]}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]})";
}

/// A "runtimeConfig" member (JSON text) limiting both directions to `rate` bit/s with `burst`
/// bits of burst.
inline std::string runtime_bandwidth(uint64_t rate, uint64_t burst) {
  std::string r = std::to_string(rate), b = std::to_string(burst);
  return R"("runtimeConfig": {"bandwidth": {"ingressRate": )" + r + R"(, "ingressBurst": )" + b + R"(, "egressRate": )" + r +
         R"(, "egressBurst": )" + b + "}}";
}

/// plumb's cls_bpf filters ("<hook>:<bpf_name>:<pref>") on both clsact hooks of `dev`, from `tc -j`.
inline std::set<std::string> bpf_filters(const std::string& dev) {
  std::set<std::string> out;
  for (const char* hook : {"ingress", "egress"}) {
    Proc p = sh(std::string("tc -j filter show dev ") + dev + " " + hook);
    REQUIRE(p.exit_code == 0);
    rapidjson::Document d;
    d.Parse(p.out.c_str());
    if (d.HasParseError() || !d.IsArray()) continue;  // no clsact: tc prints nothing
    for (auto& f : d.GetArray()) {
      if (!f.HasMember("options") || !f["options"].HasMember("bpf_name")) continue;
      std::string name = f["options"]["bpf_name"].GetString();
      bool da = f["options"].HasMember("direct-action") && f["options"]["direct-action"].GetBool();
      out.insert(std::string(hook) + ":" + name.substr(0, name.find(':')) + (da ? "" : "(not direct-action)") + ":" +
                 std::to_string(f["pref"].GetInt()));
    }
  }
  return out;
}

/// Whether `dev` has a clsact qdisc (`tc -j qdisc show`).
inline bool has_clsact(const std::string& dev) {
  Proc p = sh("tc -j qdisc show dev " + dev);
  return p.out.find("\"clsact\"") != std::string::npos;
}

/// Entries of the pinned map `map` (a bpffs path), independently through bpftool.
inline size_t pinned_entries(const std::string& map) {
  Proc p = sh("bpftool -j map dump pinned " + map);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE(d.IsArray());
  return d.Size();
}

/// Entries of this ABI's pinned state map.
inline size_t state_entries(const std::string& bpffs_dir) { return pinned_entries(bpffs_dir + "/bandwidth_v2/state"); }

/// The host-side veth ("veth..." without a sandbox) of a CNI result (JSON text); fails the
/// case when there is none.
inline std::string host_veth_of(const std::string& result_json) {
  rapidjson::Document d;
  d.Parse(result_json.c_str());
  REQUIRE(d.IsObject());
  for (auto& i : d["interfaces"].GetArray()) {
    std::string name = i["name"].GetString();
    if (!i.HasMember("sandbox") && name.rfind("veth", 0) == 0) return name;
  }
  FAIL("no host veth in " << result_json);
  return {};
}

/// The tc priority of plumb's bandwidth filters (0xb0e) in decimal, as bpf_filters() gives it.
inline const std::string kPrio = std::to_string(0xb0e);

/// Sends `count` UDP datagrams of 1400 bytes to dst:9 from network namespace `ns` (a path) in one
/// loop, without waiting (MSG_DONTWAIT: datagrams the stack or the shaper refuses are simply lost).
inline void udp_blast(const std::string& ns, const std::string& dst, int count) {
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), target = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(self >= 0);
  REQUIRE(target >= 0);
  REQUIRE(setns(target, CLONE_NEWNET) == 0);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(setns(self, CLONE_NEWNET) == 0);
  close(self);
  close(target);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  REQUIRE(inet_pton(AF_INET, dst.c_str(), &to.sin_addr) == 1);
  std::vector<char> payload(1400, 'x');
  for (int i = 0; i < count; ++i) {
    (void)sendto(fd, payload.data(), payload.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  close(fd);
}

}  // namespace plumb::test::bandwidth
