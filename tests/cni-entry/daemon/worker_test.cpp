// cni-entry/daemon/worker.cpp: a worker's memory does not grow with the pods it serves. Every
// real pod brings its own container ID, netns path and CNI_ARGS (pod name, UID); a worker serving
// them for its whole life (--requests-per-worker up to 1,000,000) must stay the size it was.
#include <doctest/doctest.h>

#include <string>

#include "cni-entry/daemon/wire.hpp"
#include "tests/support/plumb_daemon.hpp"

using plumb::test::Daemon;
using plumb::test::read_file;

namespace {

/// The resident set of process `pid` in KiB (VmRSS in /proc/<pid>/status).
long rss_kib(pid_t pid) {
  const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmRSS:");
  REQUIRE(at != std::string::npos);
  return std::stol(status.substr(at + 6));
}

/// A VERSION request as plumb-shim sends it, with every value distinct for `i`: a container ID,
/// a netns path and a CNI_ARGS of `args_bytes` bytes (a pod's name and UID, padded).
std::string distinct_request(int i, size_t args_bytes) {
  const std::string n = std::to_string(i);
  std::string body(plumb::daemon_wire::kRequestMagic, sizeof plumb::daemon_wire::kRequestMagic);
  for (const std::string& entry : {std::string("CNI_COMMAND=VERSION"), "CNI_CONTAINERID=" + std::string(64 - n.size(), '0') + n,
                                   "CNI_NETNS=/var/run/netns/cni-" + n, std::string("CNI_IFNAME=eth0"),
                                   "CNI_ARGS=K8S_POD_NAME=pod-" + n + ";K8S_POD_UID=" + n + std::string(args_bytes, 'u')}) {
    body += entry;
    body += '\0';
  }
  return body;
}

}  // namespace

TEST_CASE("a worker's memory stays bounded over invocations whose container ID, netns and CNI_ARGS all differ") {
  plumb::test::Node node;
  Daemon d({"--workers", "1", "--requests-per-worker", "1000000"});
  const pid_t worker = *d.workers().begin();
  // 8 KiB of CNI_ARGS per invocation: whatever a worker kept of each request's values would be
  // 2 MiB over the measured 250 invocations.
  constexpr size_t kArgsBytes = 8192;
  auto serve = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      const auto st = plumb::test::daemon_request(d.socket, distinct_request(i, kArgsBytes));
      REQUIRE(st.end == plumb::daemon_wire::End::kExited);
      REQUIRE(st.value == 0);
    }
  };
  serve(0, 50);  // the heap and the request buffer warm
  const long warm = rss_kib(worker);
  serve(50, 300);
  const long after = rss_kib(worker);
  CHECK(d.workers() == std::set<pid_t>{worker});  // the same worker served them all
  CHECK_MESSAGE(after - warm < 512, "the worker grew from " << warm << " KiB to " << after << " KiB");
}
