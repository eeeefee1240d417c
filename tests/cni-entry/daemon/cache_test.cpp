// cni-entry/daemon/cache (+ cni-entry/source/watched, engine/k8s/reflector): `plumb daemon` with
// --kubeconfig and --node-name lists and watches its node's pods, the NADs and the IPAMClaims of
// the Kubernetes API test server; its workers read from there. Counted at the server: an ADD
// whose pod and NADs are cached makes no GET, a DEL no request at all; a watch that drops
// resumes from its resourceVersion without a list; a compacted version (410 Expired) makes the
// daemon list again; a NAD and pod created a moment before the ADD are read with a GET; an API
// server that goes away is retried with a back-off and listed again when it is back.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "tests/support/kube_cluster.hpp"
#include "tests/support/plumb_daemon.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::Daemon;
using plumb::test::eventually;
using plumb::test::KubeCluster;
using plumb::test::Node;
using plumb::test::Proc;

namespace {

const std::string kPodPath = "/api/v1/namespaces/default/pods/web";
const std::string kNadPath = "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/";
const std::map<std::string, std::string> kBlue = {{"k8s.v1.cni.cncf.io/networks", "blue"}};

/// The requests of the server's log that start with `prefix` and contain `part`.
size_t requests_like(const KubeCluster& c, const std::string& prefix, const std::string& part = {}) {
  size_t n = 0;
  for (const auto& r : c.api.requests()) n += r.starts_with(prefix) && r.find(part) != std::string::npos ? 1 : 0;
  return n;
}

/// The server's log without the watches' own requests (lists and watches of the collections).
std::vector<std::string> other_requests(const KubeCluster& c) {
  std::vector<std::string> out;
  for (const auto& r : c.api.requests()) {
    const bool collection = r.starts_with("GET /api/v1/pods?") ||
                            r.starts_with("GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions?") ||
                            r.starts_with("GET /apis/k8s.cni.cncf.io/v1alpha1/ipamclaims?");
    if (!collection) out.push_back(r);
  }
  return out;
}

/// The daemon of node-1 watching `c`'s API server, once its pod and NAD watches run (their
/// lists were sent to the daemon before the watches were asked for).
struct WatchingDaemon {
  explicit WatchingDaemon(const KubeCluster& c)
      : d({"--workers", "1", "--kubeconfig", c.kubeconfig, "--node-name", "node-1"}) {
    REQUIRE_MESSAGE(eventually([&] {
                      return requests_like(c, "GET /api/v1/pods?watch=1") == 1 &&
                             requests_like(c, "GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions?watch=1") ==
                                 1;
                    }),
                    plumb::test::read_file(d.log));
  }
  Daemon d;
};

void write_control(const KubeCluster& c, const std::string& json) { c.api.set_watch_control(json); }

Proc add_via(const KubeCluster& c, const Daemon& d, const std::string& cid, const std::string& netns,
             const std::string& pod, const std::string& uid) {
  return c.run("ADD", cid, netns, "default", pod, uid, c.config(), {{"PLUMB_DAEMON_SOCKET", d.socket}},
               plumb::test::plumb_shim_binary());
}

}  // namespace

TEST_CASE("with the node's pods and the NADs watched, an ADD through the daemon makes no GET, a DEL no request") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "web", "uid-1", kBlue);
  WatchingDaemon w(c);
  // Pods of other nodes are not listed: the field selector is the node's.
  CHECK(requests_like(c, "GET /api/v1/pods?", "fieldSelector=spec.nodeName%3Dnode-1") == 2);
  const std::string ns = node.add_netns("web");

  Proc add = add_via(c, w.d, "ctr-1", ns, "web", "uid-1");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err << plumb::test::read_file(w.d.log));
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(c.api.count("GET", kPodPath) == 0);
  CHECK(c.api.count("GET", kNadPath + "blue") == 0);
  CHECK(c.api.count("PATCH", kPodPath + "/status", "200") == 1);
  CHECK(c.network_status("default", "web").find("198.51.100.2") != std::string::npos);
  // The daemon's stderr has the invocation's line (what `kubectl logs` of the daemon shows).
  CHECK(eventually([&] {
    return plumb::test::read_file(w.d.log).find(
               "plumb daemon: ADD default/web container=ctr-1 ifname=eth0 "
               "networks=default-net,default/blue code=0 duration_ms=") != std::string::npos;
  }));

  // The ADD's Events (posted once the shim has its answer) before the DEL's count starts.
  REQUIRE(eventually([&] { return requests_like(c, "POST /apis/events.k8s.io/", " 201 ") == 2; }));
  c.api.clear_requests();
  Proc del = c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", c.config(), {{"PLUMB_DAEMON_SOCKET", w.d.socket}},
                   plumb::test::plumb_shim_binary());
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(other_requests(c).empty());
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
}

TEST_CASE("a NAD and a pod created a moment before the ADD, not yet seen by the watch, are read with a GET") {
  Node node;
  KubeCluster c(node);
  WatchingDaemon w(c);
  write_control(c, R"({"hold": true})");  // the watches see nothing new until released
  c.add_nad("default", "green", plumb::test::bridge_net("br-green", "203.0.113.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "green"}});
  const std::string ns = node.add_netns("web");
  Proc add = add_via(c, w.d, "ctr-1", ns, "web", "uid-1");
  write_control(c, R"({"hold": false})");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(c.api.count("GET", kPodPath, "200") == 1);
  CHECK(c.api.count("GET", kNadPath + "green", "200") == 1);
}

TEST_CASE(
    "a watch that drops resumes from its resourceVersion without a list; a compacted version makes the daemon list "
    "again") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  WatchingDaemon w(c);
  const std::string pods_list = "GET /api/v1/pods?fieldSelector", pods_watch = "GET /api/v1/pods?watch=1";
  // What the server and the daemon saw, for a failure's message.
  INFO("requests: " << plumb::test::read_file(c.api.dir() + "/requests.log")
                    << "\nevents: " << plumb::test::read_file(c.api.dir() + "/watch-events.log")
                    << "\ndaemon: " << plumb::test::read_file(w.d.log));

  SUBCASE("dropped: watched again from the last version; a pod added meanwhile is cached") {
    write_control(c, R"({"hold": true})");
    write_control(c, R"({"hold": true, "drop": 1})");
    c.add_pod("default", "web", "uid-1", kBlue);
    write_control(c, R"({"drop": 1})");
    REQUIRE(eventually([&] { return requests_like(c, pods_watch) == 2; }));
    CHECK(requests_like(c, pods_list) == 1);
    CHECK(requests_like(c, pods_watch, "resourceVersion=&") == 0);  // never from "now": nothing missed
    // The pod's event was sent to the daemon (it reaches its cache long before the shim below
    // has started).
    REQUIRE(eventually([&] {
      return plumb::test::read_file(c.api.dir() + "/watch-events.log").find("ADDED pods default/web") !=
             std::string::npos;
    }));
  }
  SUBCASE("compacted while dropped: 410 Expired, listed again") {
    write_control(c, R"({"hold": true})");
    c.add_pod("default", "web", "uid-1", kBlue);
    write_control(c, R"({"hold": true, "drop": 1, "compact": 1})");
    // The first watch ended while the pod was held back: only the list that follows the 410 tells it.
    REQUIRE(eventually([&] { return requests_like(c, pods_watch) >= 2; }));
    write_control(c, R"({"drop": 1, "compact": 1})");
    // The list that names the pod was sent to the daemon before the watch that follows it.
    REQUIRE(eventually([&] { return requests_like(c, pods_list) == 2 && requests_like(c, pods_watch) >= 3; }));
  }
  // The pod reached the daemon's cache either way: an ADD without a GET.
  const std::string ns = node.add_netns("web");
  c.api.clear_requests();
  Proc add = add_via(c, w.d, "ctr-1", ns, "web", "uid-1");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  CHECK(c.api.count("GET", kPodPath) == 0);
}

TEST_CASE("an API server that goes away and comes back: the daemon backs off, then lists and watches it again") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  WatchingDaemon w(c);
  c.api.stop();
  // Retried with a back-off, said on the daemon's stderr.
  REQUIRE(eventually([&] { return plumb::test::read_file(w.d.log).find("watch of pods:") != std::string::npos; }));
  c.add_pod("default", "web", "uid-1", kBlue);  // while the server is away
  c.api.clear_requests();
  c.api.restart();
  INFO("requests: " << plumb::test::read_file(c.api.dir() + "/requests.log")
                    << "\ndaemon: " << plumb::test::read_file(w.d.log));
  // The new server has no history of the old one's versions: 410, and a list that names the pod.
  REQUIRE(eventually([&] {
    return requests_like(c, "GET /api/v1/pods?fieldSelector") == 1 && requests_like(c, "GET /api/v1/pods?watch=1") >= 1;
  }));
  const std::string ns = node.add_netns("web");
  Proc add = add_via(c, w.d, "ctr-1", ns, "web", "uid-1");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  CHECK(c.api.count("GET", kPodPath) == 0);
  CHECK(c.api.count("GET", kNadPath + "blue") == 0);
}

TEST_CASE("a daemon worker posts the ADD's Events after its shim has the answer, still busy for the daemon meanwhile") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "web", "uid-1", kBlue);
  WatchingDaemon w(c);
  c.api.set_faults(R"([{"match": "^POST /apis/events.k8s.io/", "action": "delay", "seconds": 2}])");
  const std::string events = "POST /apis/events.k8s.io/v1/namespaces/default/events";
  Proc add = add_via(c, w.d, "ctr-1", node.add_netns("web"), "web", "uid-1");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  // The shim ended while the server still held the first Event's POST (it logs a request when it
  // answers it).
  CHECK(requests_like(c, events) == 0);
  CHECK(c.api.count("PATCH", kPodPath + "/status", "200") == 1);
  // Another invocation meanwhile is not handed to the busy worker: it gets one of its own.
  Proc version = c.run("VERSION", "ctr-2", "", "default", "web", "uid-1", c.config(),
                       {{"PLUMB_DAEMON_SOCKET", w.d.socket}}, plumb::test::plumb_shim_binary());
  CHECK(version.exit_code == 0);
  const auto pids = w.d.served_by(2);
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] != pids[1]);
  REQUIRE(eventually([&] { return requests_like(c, events, " 201 ") == 2; }));
}
