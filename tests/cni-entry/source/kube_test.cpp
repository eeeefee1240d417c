// The pod source on the Kubernetes API (cni-entry/source/kube.cpp) against the API test server (TLS
// on the node's loopback): in-cluster service-account credentials with a token rotated between two
// requests of one process, TLS verification, timeouts with retries and backoff, conflict
// handling of IPAMClaim status writes, and the client a daemon worker keeps across invocations
// (one TLS connection for many, a new one after a server restart, a fork or other credentials; a
// connection the server closes in the middle of an answer: the read retried on a new one; the
// cluster IPAM's requests on the same connection).
#include "cni-entry/source/kube.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/kube_cluster.hpp"
#include "tests/support/plumb_daemon.hpp"

using namespace plumb;
using plumb::test::KubeApiServer;
using plumb::test::Node;
using plumb::test::write_file;

namespace {

const std::string kPodPath = "/api/v1/namespaces/default/pods/web";

void add_pod(const KubeApiServer& api) {
  api.put("pods", "default", "web",
          R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "uid": "uid-1",
              "resourceVersion": "3", "annotations": {"k8s.v1.cni.cncf.io/networks": "blue", "kubernetes.io/config.source": "api"}}})");
}

/// A service-account directory as the kubelet mounts it, with `token`.
std::string service_account(const Node& node, const KubeApiServer& api, const std::string& token) {
  std::string dir = node.dir() + "/serviceaccount";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(api.tls("ca.crt"), dir + "/ca.crt", std::filesystem::copy_options::overwrite_existing);
  write_file(dir + "/token", token);
  return dir;
}

/// Pods web, db and app (uid-1..3) on network blue (a bridge; its config `blue`, else
/// host-local on 198.51.100.0/24), ADDed through the shim to a one-worker daemon that keeps its
/// API client across invocations.
struct WorkerPods {
  plumb::test::KubeCluster c;
  plumb::test::Daemon d{std::vector<std::string>{"--workers", "1"}};
  Node& node;
  size_t events = 0;  // the Events posted so far (201)

  explicit WorkerPods(Node& n, const std::string& blue_conf = {}) : c(n), node(n) {
    c.add_nad("default", "blue",
              blue_conf.empty() ? plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()) : blue_conf);
    const std::map<std::string, std::string> blue = {{"k8s.v1.cni.cncf.io/networks", "blue"}};
    c.add_pod("default", "web", "uid-1", blue);
    c.add_pod("default", "db", "uid-2", blue);
    c.add_pod("default", "app", "uid-3", blue);
  }

  /// ADD of `pod` (container `cid`): it succeeds and its network-status names its address.
  void add(const std::string& cid, const std::string& pod, const std::string& uid) {
    plumb::test::Proc p = c.run("ADD", cid, node.add_netns(pod), "default", pod, uid, c.config(),
                                {{"PLUMB_DAEMON_SOCKET", d.socket}}, plumb::test::plumb_shim_binary());
    REQUIRE_MESSAGE(p.exit_code == 0, p.out << p.err << plumb::test::read_file(d.log));
    // Its two Events (eth0, net1) are posted after the answer; the worker is busy until then and
    // a next ADD meanwhile would get a worker of its own.
    events += 2;
    REQUIRE(plumb::test::eventually(
        [&] { return c.api.count("POST", "/apis/events.k8s.io/v1/namespaces/default/events", "201") == events; }));
    CHECK(c.network_status("default", pod).find("198.51.100.") != std::string::npos);
  }

  /// ADDs of web (ctr-1) and db (ctr-2); both served by the one worker, whose pid it returns.
  pid_t add_two() {
    add("ctr-1", "web", "uid-1");
    add("ctr-2", "db", "uid-2");
    const auto pids = d.served_by(2);
    REQUIRE(pids.size() == 2);
    CHECK(pids[0] == pids[1]);
    return pids[0];
  }
};

}  // namespace

TEST_CASE("in-cluster credentials: the service-account token is re-read for every request") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  add_pod(api);
  api.set_tokens({"sa-1"});
  std::string sa = service_account(node, api, "sa-1");
  auto creds = source::kube::in_cluster("127.0.0.1", std::to_string(api.port()), sa);
  REQUIRE(creds.has_value());
  auto src = source::kube::make_kube_source(*creds, {}, "kube-system");

  auto first = src->pod({"default", "web", "uid-1"});
  REQUIRE_MESSAGE(first.has_value(), (first ? "" : first.error().text()));
  REQUIRE(first->has_value());
  CHECK((*first)->uid == "uid-1");
  CHECK((*first)->resource_version == "3");
  CHECK_FALSE((*first)->is_static);
  CHECK((*first)->annotations.at("k8s.v1.cni.cncf.io/networks") == "blue");

  // The kubelet rotates the projected token; the same client object must follow.
  api.set_tokens({"sa-2"});
  write_file(sa + "/token", "sa-2\n");
  auto second = src->pod({"default", "web", "uid-1"});
  REQUIRE_MESSAGE(second.has_value(), (second ? "" : second.error().text()));
  CHECK(api.count("GET", kPodPath, "200") == 2);

  write_file(sa + "/token", "sa-1\n");  // revoked
  auto third = src->pod({"default", "web", "uid-1"});
  REQUIRE_FALSE(third.has_value());
  CHECK(third.error().cni_code == cni_code::kInvalidConfig);
  CHECK(third.error().msg.find("401 Unauthorized") != std::string::npos);
  CHECK(third.error().msg.find("in-cluster service account " + sa) != std::string::npos);
  CHECK(src->ready().error().cni_code == cni_code::kPluginNotAvailable);

  std::filesystem::remove(sa + "/token");
  auto missing = src->pod({"default", "web", "uid-1"});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().text().find(sa + "/token") != std::string::npos);
}

TEST_CASE("the server certificate is verified against the configured CA") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  add_pod(api);
  api.set_tokens({"t"});
  source::kube::Credentials creds;
  creds.server = api.url();
  creds.token = "t";
  creds.ca_file = api.tls("client.crt");  // not the CA that signed the server's certificate
  creds.origin = "test";
  auto src = source::kube::make_kube_source(creds, {}, "kube-system");
  auto r = src->pod({"default", "web", ""});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(r.error().msg.find("TLS") != std::string::npos);
  CHECK(api.requests().empty());
  CHECK(src->ready().error().cni_code == cni_code::kPluginNotAvailable);

  creds.ca_file = api.tls("ca.crt");
  CHECK(source::kube::make_kube_source(creds, {}, "kube-system")->pod({"default", "web", ""}).has_value());
}

TEST_CASE("an unresponsive server: every attempt times out, retried with backoff, then a clear error") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  add_pod(api);
  api.set_tokens({"t"});
  api.set_faults(R"([{"match": "pods/web$", "action": "delay", "seconds": 5}])");
  source::kube::Credentials creds;
  creds.server = api.url();
  creds.token = "t";
  creds.ca_file = api.tls("ca.crt");
  creds.origin = "test";
  source::kube::Options opts;
  opts.timeout = std::chrono::milliseconds(400);
  opts.retries = 2;
  opts.backoff = std::chrono::milliseconds(100);
  auto src = source::kube::make_kube_source(creds, opts, "kube-system");
  auto t0 = std::chrono::steady_clock::now();
  auto r = src->pod({"default", "web", ""});
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kTryAgainLater);
  CHECK(r.error().msg.find("3 attempts, 400 ms timeout each") != std::string::npos);
  // 3 x 400 ms + 100 ms + 200 ms of backoff, give or take.
  CHECK(took >= std::chrono::milliseconds(1400));
  CHECK(took < std::chrono::milliseconds(4000));
  // STATUS probes once and reports limited connectivity.
  api.set_faults(R"([{"match": "network-attachment-definitions", "action": "delay", "seconds": 5}])");
  auto st = src->ready();
  REQUIRE_FALSE(st.has_value());
  CHECK(st.error().cni_code == cni_code::kPluginNotReady);
}

TEST_CASE("IPAMClaim status.ips: a stale resourceVersion is re-read and retried; another writer's addresses win") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  api.set_tokens({"t"});
  auto claim = [&](const std::string& rv, const std::string& status) {
    api.put(
        "ipamclaims", "default", "c1",
        R"({"apiVersion": "k8s.cni.cncf.io/v1alpha1", "kind": "IPAMClaim", "metadata": {"name": "c1", "namespace": "default",
                "resourceVersion": ")" +
            rv + R"("}, "spec": {"network": "blue", "interface": "net1"})" + status + "}");
  };
  source::kube::Credentials creds;
  creds.server = api.url();
  creds.token = "t";
  creds.ca_file = api.tls("ca.crt");
  creds.origin = "test";
  auto src = source::kube::make_kube_source(creds, {}, "kube-system");
  const std::string path = "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/default/ipamclaims/c1/status";

  claim("5", "");
  auto c = src->ipam_claim("default", "c1");
  REQUIRE(c.has_value());
  REQUIRE(c->has_value());
  CHECK((*c)->network == "blue");
  CHECK((*c)->ips.empty());
  claim("6", "");  // someone touched it after we read it
  REQUIRE(src->write_ipam_claim_status("default", "c1", {{"198.51.100.2/24"}, "vm-a", "2026-01-02T03:04:05Z"}).has_value());
  CHECK(api.count("PATCH", path, "409") == 1);
  CHECK(api.count("PATCH", path, "200") == 1);
  // ipamclaims v1alpha1's status: ips, ownerPod, conditions (OVN-Kubernetes' IPsAllocated).
  const std::string stored = api.get("ipamclaims", "default", "c1");
  CHECK(stored.find("198.51.100.2/24") != std::string::npos);
  CHECK(stored.find(R"("ownerPod":{"name":"vm-a"})") != std::string::npos);
  CHECK(stored.find(R"("type":"IPsAllocated","status":"True","reason":"SuccessfulAllocation")") != std::string::npos);
  CHECK(stored.find(R"("lastTransitionTime":"2026-01-02T03:04:05Z")") != std::string::npos);

  claim("7", "");
  REQUIRE(src->ipam_claim("default", "c1").has_value());
  claim("8", R"(, "status": {"ips": ["198.51.100.9/24"]})");
  auto lost = src->write_ipam_claim_status("default", "c1", {{"198.51.100.2/24"}, "vm-a", "2026-01-02T03:04:05Z"});
  REQUIRE_FALSE(lost.has_value());
  CHECK(lost.error().cni_code == cni_code::kConflict);
  CHECK(lost.error().msg.find("198.51.100.9/24") != std::string::npos);

  api.remove("ipamclaims", "default", "c1");
  auto gone = src->ipam_claim("default", "c1");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
}

TEST_CASE(
    "kept clients: sources one after another share one TLS connection; other options, a fork or a restart get a new "
    "one") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  add_pod(api);
  api.set_tokens({"sa-1"});
  const std::string sa = service_account(node, api, "sa-1");
  auto creds = source::kube::in_cluster("127.0.0.1", std::to_string(api.port()), sa);
  REQUIRE(creds.has_value());
  // One source per invocation, as a daemon worker makes them: "ok" or what went wrong.
  auto read_pod = [&](const source::kube::Options& o) {
    auto got = source::kube::make_kube_source(*creds, o, "kube-system")->pod({"default", "web", "uid-1"});
    return !got ? got.error().text() : got->has_value() ? std::string("ok") : std::string("no pod");
  };
  k8s::keep_clients(true);
  CHECK(read_pod({}) == "ok");
  CHECK(read_pod({}) == "ok");
  CHECK(api.tls_connections() == 1);
  // The token is still read from its file for every request.
  api.set_tokens({"sa-2"});
  write_file(sa + "/token", "sa-2\n");
  CHECK(read_pod({}) == "ok");
  CHECK(api.tls_connections() == 1);

  source::kube::Options other;
  other.retries = 2;
  CHECK(read_pod(other) == "ok");  // a client of its own
  CHECK(read_pod(other) == "ok");
  CHECK(api.tls_connections() == 2);

  // The server closed the kept connection: the next request is made on a new one, no error.
  api.restart();
  CHECK(read_pod(other) == "ok");
  CHECK(api.tls_connections() == 3);
  CHECK(api.count("GET", kPodPath, "200") == 6);

  // A child forked with the kept client makes its own; the parent's connection still serves.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(read_pod(other) == "ok" ? 0 : 1);
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(api.tls_connections() == 4);
  CHECK(read_pod(other) == "ok");
  CHECK(api.tls_connections() == 4);

  k8s::keep_clients(false);  // a client per source again
  CHECK(read_pod(other) == "ok");
  CHECK(read_pod(other) == "ok");
  CHECK(api.tls_connections() == 6);
}

TEST_CASE(
    "a daemon worker's ADDs share one API server connection; after a server restart the next ADD still succeeds") {
  Node node;
  WorkerPods w(node);
  auto& c = w.c;
  const pid_t worker = w.add_two();
  CHECK(c.api.count("GET", kPodPath, "200") == 1);
  CHECK(c.api.tls_connections() == 1);

  c.api.restart();
  w.add("ctr-3", "app", "uid-3");
  CHECK(w.d.served_by(3).back() == worker);
  CHECK(c.api.tls_connections() == 2);
}

TEST_CASE("a daemon worker's cluster-IPAM ADDs (whereabouts on the API server) share its one API server connection") {
  Node node;
  WorkerPods w(node, R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue",
                        "ipam": {"type": "whereabouts", "range": "198.51.100.0/24"}})");
  auto& c = w.c;
  w.add_two();
  // Both ADDs allocated from the IPPool (created by the first), on the pod source's connection.
  INFO("requests: " << plumb::test::read_file(c.api.dir() + "/requests.log"));
  const std::string pool = "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools/198.51.100.0-24";
  CHECK(c.api.count("POST", "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools", "201") == 1);
  CHECK(c.api.count("GET", pool, "200") >= 1);
  CHECK(c.api.tls_connections() == 1);
}

TEST_CASE(
    "a daemon worker's kept API connection closed by the server in the middle of an answer: the read is retried on a "
    "new connection, that ADD and the next succeed") {
  Node node;
  WorkerPods w(node);
  auto& c = w.c;
  w.add("ctr-1", "web", "uid-1");
  REQUIRE(c.api.tls_connections() == 1);

  // db's pod read gets its headers and half its body, then the server closes the kept connection.
  const std::string db = "/api/v1/namespaces/default/pods/db";
  c.api.set_faults("[{\"match\": \"^GET " + db + "([?]|$)\", \"action\": \"cut\", \"times\": 1}]");
  w.add("ctr-2", "db", "uid-2");
  CHECK(c.api.count("GET", db, "CUT") == 1);
  CHECK(c.api.count("GET", db, "200") == 1);
  CHECK(c.api.tls_connections() == 2);

  // The worker keeps the new connection for its next ADD.
  w.add("ctr-3", "app", "uid-3");
  const auto pids = w.d.served_by(3);
  REQUIRE(pids.size() == 3);
  CHECK((pids[0] == pids[1] && pids[1] == pids[2]));
  CHECK(c.api.tls_connections() == 2);
}
