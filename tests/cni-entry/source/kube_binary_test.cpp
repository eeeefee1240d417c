// plumb against a Kubernetes API server (the test server in tests/support/kube_api_test_server.py,
// TLS on the node's loopback): pods and NADs read from the API, network-status written through
// pods/status, the failure modes Multus is known for. The real plumb binary is run as a runtime
// runs it; the server counts every request.
#include <doctest/doctest.h>

#include <chrono>

#include "cni-entry/source/kube.hpp"
#include "tests/support/kube_cluster.hpp"

using plumb::test::address_files;
using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::write_file;

namespace {

const std::string kPodPath = "/api/v1/namespaces/default/pods/web";
const std::string kStatusPath = "/api/v1/namespaces/default/pods/web/status";
const std::string kBluePath = "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/blue";
const std::map<std::string, std::string> kBlue = {{"k8s.v1.cni.cncf.io/networks", "blue"}};

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  return d;
}

std::string mac_of(const std::string& ns, const std::string& ifname) {
  auto d = plumb::test::ip_json("-n " + ns + " link show dev " + ifname);
  return d[0]["address"].GetString();
}

/// The CNI error code plumb printed (0 if none).
int error_code(const Proc& p) {
  auto d = parse(p.out);
  return d.IsObject() && d.HasMember("code") ? d["code"].GetInt() : 0;
}

void setup_blue(const KubeCluster& c) {
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
}

}  // namespace

TEST_CASE("ADD reads annotations and NADs from the API server and writes network-status once; DEL sends no request") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-1", kBlue);
  std::string ns = node.add_netns("web");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});

  CHECK(c.api.count("GET", kPodPath, "200") == 1);
  CHECK(c.api.count("GET", kBluePath, "200") == 1);
  CHECK(c.api.count("PATCH", kStatusPath) == 1);
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
  auto st = parse(c.network_status("default", "web"));
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[0]["name"].GetString()) == "default-net");
  CHECK(st[0]["default"].GetBool());
  CHECK(std::string(st[1]["name"].GetString()) == "default/blue");
  CHECK(std::string(st[1]["interface"].GetString()) == "net1");
  CHECK(std::string(st[1]["ips"][0].GetString()) == "198.51.100.2");
  // Other annotations of the pod are untouched (a merge patch of one key).
  CHECK(parse(c.api.get("pods", "default", "web"))["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "blue");

  c.api.clear_requests();
  Proc del = c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("DEL stderr: ", del.err);
  CHECK(del.exit_code == 0);
  CHECK(c.api.requests().empty());
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(address_files(c.fx.ipam_dir()).empty());
  CHECK(c.records().empty());
}

TEST_CASE("annotations handed over by the runtime are used without any pod GET") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  // The API object has no selection: had plumb read it, the pod would get no net1.
  c.add_pod("default", "web", "uid-1", {});
  std::string ns = node.add_netns("web");
  std::string conf =
      c.config(R"("runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": "blue"}})");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", conf);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(c.api.count("GET", kPodPath) == 0);
  CHECK(c.api.count("GET", kBluePath, "200") == 1);  // what is missing is still asked for
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
  auto st = parse(c.network_status("default", "web"));
  REQUIRE(st.IsArray());
  CHECK(st.Size() == 2);
}

TEST_CASE("a 409 on the status write re-reads the pod and retries; the status is written once") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-1", kBlue);
  std::string ns = node.add_netns("web");
  // Another writer changes the pod right after plumb read it: plumb's resourceVersion is stale.
  c.api.set_faults(R"([{"match": "^GET /api/v1/namespaces/default/pods/web$", "action": "bump_rv", "times": 1}])");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(c.api.count("PATCH", kStatusPath, "409") == 1);
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
  CHECK(c.api.count("PATCH", kStatusPath) == 2);
  CHECK(c.api.count("GET", kPodPath, "200") == 2);  // the re-read after the conflict
  auto st = parse(c.network_status("default", "web"));
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["ips"][0].GetString()) == "198.51.100.2");
  CHECK(std::string(st[0]["mac"].GetString()) == mac_of("web", "eth0"));
}

TEST_CASE("a rotated token file is read again on the next request") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "a", "uid-a", kBlue);
  c.add_pod("default", "b", "uid-b", kBlue);
  c.add_pod("default", "c", "uid-c", kBlue);
  std::string a = node.add_netns("a"), b = node.add_netns("b"), cns = node.add_netns("c");

  Proc add_a = c.run("ADD", "ctr-a", a, "default", "a", "uid-a", c.config());
  INFO("a: ", add_a.err);
  REQUIRE(add_a.exit_code == 0);

  // Rotation: the server now accepts only the new token, which the kubelet wrote to the file.
  c.api.set_tokens({"tok-2"});
  write_file(c.token_file, "tok-2\n");
  Proc add_b = c.run("ADD", "ctr-b", b, "default", "b", "uid-b", c.config());
  INFO("b: ", add_b.err);
  CHECK(add_b.exit_code == 0);
  CHECK(link_names("b").count("net1") == 1);

  // Control: the server really rejects the old token.
  write_file(c.token_file, "tok-1\n");
  Proc add_c = c.run("ADD", "ctr-c", cns, "default", "c", "uid-c", c.config());
  INFO("c: ", add_c.out);
  CHECK(add_c.exit_code != 0);
  CHECK(add_c.out.find("401") != std::string::npos);
  CHECK(add_c.out.find("rejected the credentials") != std::string::npos);
  CHECK(link_names("c") == std::set<std::string>{"lo"});
}

TEST_CASE("client certificate and key given inline (client-certificate-data) authenticate") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-1", kBlue);
  c.api.set_tokens({});
  c.api.write_kubeconfig(c.kubeconfig, "client-certificate-data: " + c.api.base64_of(c.api.tls("client.crt")) +
                                           "\n    client-key-data: " + c.api.base64_of(c.api.tls("client.key")));
  std::string ns = node.add_netns("web");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  auto reqs = c.api.requests();
  REQUIRE_FALSE(reqs.empty());
  for (auto& r : reqs) CHECK(r.ends_with(" cert"));
}

TEST_CASE("API server down: ADD fails with a clear error and attaches nothing; DEL still cleans everything at once") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "a", "uid-a", kBlue);
  c.add_pod("default", "b", "uid-b", kBlue);
  std::string a = node.add_netns("a"), b = node.add_netns("b");
  Proc add_a = c.run("ADD", "ctr-a", a, "default", "a", "uid-a", c.config());
  INFO("a: ", add_a.err);
  REQUIRE(add_a.exit_code == 0);
  auto files_before = address_files(c.fx.ipam_dir());
  CHECK(files_before.size() == 3);  // eth0 v4 + v6, net1

  c.api.stop();
  Proc add_b = c.run("ADD", "ctr-b", b, "default", "b", "uid-b", c.config());
  INFO("b: ", add_b.out);
  CHECK(add_b.exit_code != 0);
  CHECK(error_code(add_b) == 11);  // try again later
  CHECK(add_b.out.find("cannot be reached") != std::string::npos);
  CHECK(add_b.out.find("GET " + c.api.url() + "/api/v1/namespaces/default/pods/b") != std::string::npos);
  CHECK(link_names("b") == std::set<std::string>{"lo"});
  CHECK(address_files(c.fx.ipam_dir()).size() == files_before.size());

  // An API server that accepts connections but never answers: DEL must not wait for it.
  c.api.set_faults(R"([{"match": ".", "action": "delay", "seconds": 60}])");
  c.api.restart();
  c.api.clear_requests();
  auto t0 = std::chrono::steady_clock::now();
  Proc del = c.run("DEL", "ctr-a", a, "default", "a", "uid-a", c.config() /* 3 s timeout, 1 retry */);
  auto took = std::chrono::steady_clock::now() - t0;
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(took < std::chrono::seconds(2));
  CHECK(c.api.requests().empty());
  CHECK(link_names("a") == std::set<std::string>{"lo"});
  CHECK(link_names("").count("br-blue") == 1);  // bridges are shared and stay
  CHECK(address_files(c.fx.ipam_dir()).empty());
  CHECK(c.records().empty());
}

TEST_CASE("a dropped connection and a 503 are retried") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-1", kBlue);
  std::string ns = node.add_netns("web");
  c.api.set_faults(R"([{"match": "^GET /api/v1/namespaces/default/pods/web$", "action": "drop", "times": 1},
                       {"match": "network-attachment-definitions/blue$", "action": "fail", "code": 503, "times": 1}])");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(c.api.count("GET", kPodPath, "DROP") == 1);
  CHECK(c.api.count("GET", kPodPath, "200") == 1);
  CHECK(c.api.count("GET", kBluePath, "503") == 1);
  CHECK(c.api.count("GET", kBluePath, "200") == 1);
}

TEST_CASE("a pod UID different from K8S_POD_UID fails the ADD unless the pod is static") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-new", kBlue);
  std::string ns = node.add_netns("web");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-old", c.config());
  INFO("stdout: ", add.out);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("expected pod UID \\\"uid-old\\\"") != std::string::npos);
  CHECK(add.out.find("uid-new") != std::string::npos);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(c.api.count("PATCH", kStatusPath) == 0);
  CHECK(c.records().empty());

  // A static pod's mirror object has its own UID: accepted, and the status is written to it.
  auto ann = kBlue;
  ann["kubernetes.io/config.source"] = "file";
  ann["kubernetes.io/config.mirror"] = "uid-old";
  c.add_pod("default", "web", "uid-mirror", ann);
  Proc add2 = c.run("ADD", "ctr-2", ns, "default", "web", "uid-old", c.config());
  INFO("stdout: ", add2.out, "\nstderr: ", add2.err);
  CHECK(add2.exit_code == 0);
  CHECK(link_names("web").count("net1") == 1);
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
}

TEST_CASE(
    "a static pod with runtime annotations: the UID precondition fails once, the mirror is read, status written") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-mirror",
            {{"kubernetes.io/config.source", "file"}, {"kubernetes.io/config.mirror", "uid-static"}});
  std::string ns = node.add_netns("web");
  std::string conf =
      c.config(R"("runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": "blue"}})");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-static", conf);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(c.api.count("PATCH", kStatusPath, "409") == 1);  // K8S_POD_UID is not the mirror's
  CHECK(c.api.count("GET", kPodPath, "200") == 1);
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
  CHECK_FALSE(c.network_status("default", "web").empty());

  // A pod replaced by another of the same name (not static) is never written to.
  c.add_pod("default", "web", "uid-other", {});
  Proc add2 = c.run("ADD", "ctr-2", node.add_netns("web2"), "default", "web", "uid-static", conf);
  INFO("stderr: ", add2.err);
  CHECK(add2.exit_code == 0);  // statusErrorsFatal is false
  CHECK(add2.err.find("the pod was replaced") != std::string::npos);
  CHECK(c.network_status("default", "web").empty());
}

TEST_CASE("network-status of a pod with three attachments is exactly the spec's shape") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_nad("team-a", "green", plumb::test::bridge_net("br-green", "192.0.2.0/24", c.fx.ipam_dir()));
  c.add_pod(
      "default", "web", "uid-1",
      {{"k8s.v1.cni.cncf.io/networks",
        R"([{"name": "blue"}, {"name": "green", "namespace": "team-a", "interface": "green0", "mac": "02:00:00:00:00:aa", "ips": ["192.0.2.77/24"]}])"}});
  std::string ns = node.add_netns("web");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  std::string expected =
      R"([{"name":"default-net","interface":"eth0","ips":["203.0.113.2","2001:db8:0:1::2"],"mac":")" +
      mac_of("web", "eth0") + R"(","mtu":1500,"default":true,"gateway":["203.0.113.1","2001:db8:0:1::1"]},)" +
      R"({"name":"default/blue","interface":"net1","ips":["198.51.100.2"],"mac":")" + mac_of("web", "net1") +
      R"(","mtu":1500,"default":false},)" +
      R"({"name":"team-a/green","interface":"green0","ips":["192.0.2.77"],"mac":"02:00:00:00:00:aa","mtu":1500,"default":false}])";
  CHECK(c.network_status("default", "web") == expected);
  CHECK(c.api.count("PATCH", kStatusPath, "200") == 1);
}

TEST_CASE("status write failures: logged and the pod keeps its networks, unless statusErrorsFatal") {
  Node node;
  KubeCluster c(node);
  setup_blue(c);
  c.add_pod("default", "web", "uid-1", kBlue);
  c.api.set_faults(R"([{"match": "^PATCH .*/pods/web/status$", "action": "fail", "code": 500}])");
  std::string ns = node.add_netns("web");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  CHECK(add.exit_code == 0);
  CHECK(add.err.find("network-status of pod default/web not written") != std::string::npos);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(c.api.count("PATCH", kStatusPath, "500") == 2);  // one retry (apiRetries 1)
  CHECK(c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", c.config()).exit_code == 0);

  Proc fatal = c.run("ADD", "ctr-2", ns, "default", "web", "uid-1", c.config(R"("statusErrorsFatal": true)"));
  INFO("fatal: ", fatal.out);
  CHECK(fatal.exit_code != 0);
  CHECK(fatal.out.find("write network-status of pod default/web") != std::string::npos);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(address_files(c.fx.ipam_dir()).empty());
  CHECK(c.records().empty());
}

TEST_CASE("no network-status is written for pods of systemNamespaces, by namespace") {
  Node node;
  KubeCluster c(node);
  c.add_pod("kube-system", "coredns", "uid-1", {});
  c.add_pod("default", "kube-system", "uid-2", {});  // a pod merely *named* like the namespace
  std::string a = node.add_netns("a"), b = node.add_netns("b");
  Proc add = c.run("ADD", "ctr-1", a, "kube-system", "coredns", "uid-1", c.config());
  INFO("stderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(c.api.count("PATCH", "/api/v1/namespaces/kube-system/pods/coredns/status") == 0);
  Proc add2 = c.run("ADD", "ctr-2", b, "default", "kube-system", "uid-2", c.config());
  INFO("stderr: ", add2.err);
  REQUIRE(add2.exit_code == 0);
  CHECK(c.api.count("PATCH", "/api/v1/namespaces/default/pods/kube-system/status", "200") == 1);
}

TEST_CASE("clusterNetwork and defaultNetworks are NADs of multusNamespace") {
  Node node;
  KubeCluster c(node);
  c.add_nad("infra", "cluster-net", plumb::test::bridge_net("br-cluster", "203.0.113.0/24", c.fx.ipam_dir()));
  c.add_nad("infra", "extra", plumb::test::bridge_net("br-extra", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "web", "uid-1", {});
  std::string ns = node.add_netns("web");
  std::string conf = R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "clusterNetwork": "cluster-net",
    "defaultNetworks": ["extra"], "multusNamespace": "infra", "kubeconfig": ")" +
                     c.kubeconfig + R"(",
    "stateDir": ")" + c.fx.state() +
                     R"(", "storeDir": ")" + c.fx.store() + R"("})";
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", conf);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(c.api.count("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/infra/network-attachment-definitions/cluster-net",
                    "200") == 1);
  CHECK(c.api.count("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/infra/network-attachment-definitions/extra", "200") ==
        1);
  auto st = parse(c.network_status("default", "web"));
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["name"].GetString()) == "infra/extra");
}

TEST_CASE("STATUS: ready with a working API server, 50 with rejected credentials, 51 when unreachable") {
  Node node;
  KubeCluster c(node);
  auto status = [&] {
    return plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "STATUS"}}, c.config({}, "1.1.0"));
  };
  Proc ok = status();
  INFO("ok: ", ok.out, ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(c.api.count("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/kube-system/network-attachment-definitions", "200") ==
        1);

  c.api.set_tokens({"another"});
  Proc bad = status();
  INFO("bad: ", bad.out);
  CHECK(bad.exit_code != 0);
  CHECK(error_code(bad) == 50);
  CHECK(bad.out.find("401") != std::string::npos);

  c.api.stop();
  Proc down = status();
  INFO("down: ", down.out);
  CHECK(down.exit_code != 0);
  CHECK(error_code(down) == 51);
  CHECK(down.out.find("cannot be reached") != std::string::npos);
}

TEST_CASE("in-cluster configuration is chosen from KUBERNETES_SERVICE_HOST without a kubeconfig") {
  Node node;
  KubeCluster c(node);
  c.add_pod("default", "web", "uid-1", {});
  std::string ns = node.add_netns("web");
  // No service account is mounted on a test machine: the ADD names the token file it looked for.
  REQUIRE_FALSE(std::filesystem::exists(std::string(plumb::source::kube::kServiceAccountDir) + "/token"));
  Proc add =
      c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.fx.config(),
            {{"KUBERNETES_SERVICE_HOST", "127.0.0.1"}, {"KUBERNETES_SERVICE_PORT", std::to_string(c.api.port())}});
  INFO("stdout: ", add.out);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("/var/run/secrets/kubernetes.io/serviceaccount/token") != std::string::npos);
  CHECK(add.out.find(c.api.url()) != std::string::npos);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
}
