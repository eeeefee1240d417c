// whereabouts' ip-control-loop (cni-entry/reconcile/pod_deleted.cpp) against the API test server
// on the loopback of a private node namespace: the allocations of a pod deleted from the API are
// released at once by the reconciler's rules, but not those of a container whose records are
// still on the node (its DEL releases them), nor another pod's; a pod re-created under the same
// name is judged by the reconciler's rules for a live pod. Allocations are made with the IPAM
// library as the node made them.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "cni-entry/reconcile/pod_deleted.hpp"
#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/whereabouts.hpp"
#include "tests/support/kube_cluster.hpp"

using namespace plumb;
namespace cl = plumb::ipam::cluster;
namespace wb = plumb::ipam::whereabouts;
using plumb::test::KubeApiServer;
using plumb::test::Node;

namespace {

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

void put_pod(const KubeApiServer& api, const std::string& name, const std::string& sandbox, bool ready) {
  api.put(
      "pods", "default", name,
      R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ")" + name +
          R"(", "namespace": "default", "uid": "uid-)" + name + R"(", "annotations": {"plumb/sandbox": ")" + sandbox +
          R"("}}, "spec": {"nodeName": "node-a"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ")" +
          (ready ? "True" : "False") + R"("}]}})");
}

ipam::Request request(const std::string& cid, const std::string& pod) {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = "net1";
  r.network_name = "blue";
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod}};
  return r;
}

std::set<std::string> holders(const KubeApiServer& api) {
  auto p = wb::decode_pool(doc(api.get("ippools", "kube-system", "blue-192.0.2.0-24")), "pool");
  REQUIRE(p.has_value());
  std::set<std::string> out;
  for (auto& [off, a] : p->allocations) out.insert(a.id);
  return out;
}

/// The API server with whereabouts' pool 192.0.2.0/24 and a client of it.
struct Cluster {
  Node node;
  KubeApiServer api{node.dir() + "/api"};
  std::string kubeconfig = node.dir() + "/kubeconfig";
  ipam::ClusterAccess access;
  std::unique_ptr<cl::KubeClusterIpam> ipam;

  Cluster() {
    api.set_tokens({"tok"});
    api.write_kubeconfig(kubeconfig, "token: tok");
    access = ipam::ClusterAccess{kubeconfig, {}, "kube-system"};
    auto k = cl::make_kube(
        *cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue"})")), "node-a",
        &access);
    REQUIRE(k.has_value());
    ipam = std::move(*k);
  }
  k8s::Client client() const {
    auto creds = k8s::load_kubeconfig(kubeconfig);
    REQUIRE(creds.has_value());
    return k8s::Client(std::move(*creds), {});
  }
};

}  // namespace

TEST_CASE("a deleted pod's allocations are released at once, not a recorded container's nor another pod's") {
  Cluster c;
  REQUIRE(c.ipam->add(request("c-dead", "web")).has_value());  // web's sandbox, its DEL never came
  REQUIRE(
      c.ipam->add(request("c-pending", "web")).has_value());  // web's sandbox still recorded here: its DEL will release
  REQUIRE(c.ipam->add(request("c-other", "other")).has_value());  // another pod (gone too, but not this event's)
  auto client = c.client();
  auto report = reconcile::release_deleted_pod(client, "kube-system", "default", "web",
                                               [](const std::string& id) { return id == "c-pending"; });
  for (const auto& e : report.errors) FAIL_CHECK(e.text());
  CHECK(holders(c.api) == std::set<std::string>{"c-pending", "c-other"});
  REQUIRE_FALSE(report.actions.empty());  // the pool's allocation, and its reservation
  for (const auto& act : report.actions) {
    CHECK(act.what.find("c-dead") != std::string::npos);
    CHECK(act.reason == "pod default/web no longer exists");
  }
}

TEST_CASE("a pod re-created under the deleted one's name keeps what its rules keep") {
  Cluster c;
  REQUIRE(c.ipam->add(request("c-old", "web")).has_value());
  REQUIRE(c.ipam->add(request("c-new", "web")).has_value());
  put_pod(c.api, "web", "c-new", /*ready=*/false);
  auto client = c.client();
  auto none = [](const std::string&) { return false; };
  auto report = reconcile::release_deleted_pod(client, "kube-system", "default", "web", none);
  CHECK(report.errors.empty());
  CHECK(report.actions.empty());  // not Ready: the reconciler leaves an earlier sandbox's address
  CHECK(holders(c.api) == std::set<std::string>{"c-old", "c-new"});
  put_pod(c.api, "web", "c-new", /*ready=*/true);
  report = reconcile::release_deleted_pod(client, "kube-system", "default", "web", none);
  CHECK(report.errors.empty());
  CHECK(holders(c.api) == std::set<std::string>{"c-new"});
}
