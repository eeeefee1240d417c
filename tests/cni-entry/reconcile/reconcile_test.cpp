// `plumb reconcile` (the real binary) against the API test server and a real etcd, both on the
// loopback of a private node namespace: allocations left by killed pods, by a vanished node, by an
// earlier sandbox of a live pod and by a deleted IPAMClaim are released in whereabouts' objects and
// in an etcd pool a NAD names; what live pods, their current sandbox and existing claims hold
// stays; --dry-run prints the same decisions and writes nothing. The allocations are made with the
// IPAM library as the nodes that made them; no address is configured on any interface.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/whereabouts.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/kube_cluster.hpp"

using namespace plumb;
namespace cl = plumb::ipam::cluster;
namespace wb = plumb::ipam::whereabouts;
using plumb::test::KubeApiServer;
using plumb::test::Node;
using plumb::test::Proc;

namespace {

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

/// A pod object on `node` with the plumb/sandbox annotation `sandbox` ("" = none), Ready or not.
void put_pod(const KubeApiServer& api, const std::string& name, const std::string& node, const std::string& sandbox,
             bool ready) {
  std::string ann = sandbox.empty() ? "{}" : R"({"plumb/sandbox": ")" + sandbox + R"("})";
  api.put("pods", "default", name,
          R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ")" + name +
              R"(", "namespace": "default", "uid": "uid-)" + name + R"(", "annotations": )" + ann +
              R"(}, "spec": {"nodeName": ")" + node + R"("}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ")" +
              (ready ? "True" : "False") + R"("}]}})");
}

void put_node(const KubeApiServer& api, const std::string& name) {
  api.put("nodes", "_cluster", name, R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": ")" + name + R"("}})");
}

void put_claim(const KubeApiServer& api, const std::string& name) {
  api.put("ipamclaims", "default", name,
          R"({"apiVersion": "k8s.cni.cncf.io/v1alpha1", "kind": "IPAMClaim", "metadata": {"name": ")" + name +
              R"(", "namespace": "default"}, "spec": {"network": "blue", "interface": "net1"}})");
}

ipam::Request request(const std::string& cid, const std::string& pod, const std::string& owner = {}) {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = "net1";
  r.network_name = "blue";
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod}};
  r.owner = owner;
  return r;
}

/// The ids holding addresses in a stored IPPool.
std::set<std::string> holders(const KubeApiServer& api, const std::string& name) {
  auto p = wb::decode_pool(doc(api.get("ippools", "kube-system", name)), name);
  REQUIRE(p.has_value());
  std::set<std::string> out;
  for (auto& [off, a] : p->allocations) out.insert(a.id);
  return out;
}

std::set<std::string> etcd_holders(cl::ClusterIpam& ipam) {
  auto owners = ipam.owners();
  REQUIRE(owners.has_value());
  std::set<std::string> out;
  for (auto& o : *owners) out.insert(o.container_id);
  return out;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& start) {
  std::vector<std::string> out;
  std::istringstream ss(text);
  for (std::string l; std::getline(ss, l);) {
    if (l.rfind(start, 0) == 0) out.push_back(l);
  }
  return out;
}

bool mentions(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

/// The Kubernetes datastore (whereabouts' objects in kube-system): pool blue (192.0.2.0/24) with
/// allocations of node-a's pods (live, killed, restarted, starting, claim-owned) and one of node-x,
/// and the node slice pool green of the fixtures.
void fill_kube_datastore(KubeApiServer& api, const std::string& kubeconfig) {
  ipam::ClusterAccess access{kubeconfig, {}, "kube-system"};
  const std::string blue = R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue"})";
  auto on = [&](const std::string& n) {
    auto k = cl::make_kube(*cl::parse_config(doc(blue)), n, &access);
    REQUIRE(k.has_value());
    return std::move(*k);
  };
  auto a = on("node-a");
  auto x = on("node-x");
  for (auto [cid, pod, owner] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"c-web", "web", ""},                // live pod, current sandbox: kept
           {"c-gone", "gone", ""},              // the pod was killed without DEL: released
           {"c-old", "restarted", ""},          // an earlier sandbox of a live pod: released
           {"c-new", "restarted", ""},          // its current sandbox: kept
           {"c-s0", "starting", ""},            // a pod not Ready yet: both of its sandboxes kept
           {"c-s1", "starting", ""},
           {"vm1", "launcher-1", "ipamclaim:default/vm1"},  // the claim exists: kept
           {"vm2", "launcher-2", "ipamclaim:default/vm2"},  // the claim was deleted: released
       }) {
    REQUIRE(a->add(request(cid, pod, owner)).has_value());
  }
  REQUIRE(x->add(request("c-stranded", "stranded")).has_value());  // its pod is bound to node-x, which is gone
  api.put("nodeslicepools", "kube-system", "green", plumb::test::read_file(std::string(PLUMB_FIXTURES) + "/whereabouts/nodeslicepool.json"));
}

/// The cluster as it is now: nodes node-a and node-b, the live pods and the claim vm1.
void put_cluster(KubeApiServer& api) {
  put_node(api, "node-a");
  put_node(api, "node-b");
  put_pod(api, "web", "node-a", "c-web", true);
  put_pod(api, "restarted", "node-a", "c-new", true);
  put_pod(api, "starting", "node-a", "c-s1", false);
  put_pod(api, "stranded", "node-x", "c-stranded", true);
  put_claim(api, "vm1");
}

}  // namespace

TEST_CASE(
    "plumb reconcile releases what killed pods, a vanished node, an old sandbox and a deleted claim held, in both "
    "datastores") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  api.set_tokens({"tok"});
  const std::string kubeconfig = node.dir() + "/kubeconfig";
  api.write_kubeconfig(kubeconfig, "token: tok");
  test::EtcdCluster etcd(1, 32479);
  REQUIRE_MESSAGE(etcd.ok(), etcd.log(0));

  fill_kube_datastore(api, kubeconfig);

  // The etcd datastore, named by a NAD.
  const std::string red = R"({"type": "whereabouts", "range": "198.51.100.0/24", "network_name": "red", "etcd_endpoints": )" +
                          etcd.endpoints_json() + "}";
  api.put("network-attachment-definitions", "default", "red",
          R"({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": "red", "namespace": "default"},
              "spec": {"config": )" + test::json_quote(R"({"cniVersion": "0.4.0", "type": "bridge", "ipam": )" + red + "}") + "}}");
  auto ea = cl::make(doc(red), "node-a");
  auto ex = cl::make(doc(red), "node-x");
  REQUIRE(ea.has_value());
  REQUIRE(ex.has_value());
  REQUIRE((*ea)->add(request("e-web", "web")).has_value());
  REQUIRE((*ea)->add(request("e-gone", "gone")).has_value());
  REQUIRE((*ex)->add(request("e-x", "web")).has_value());  // allocated on node-x, which is gone

  put_cluster(api);
  const std::set<std::string> all = {"c-web", "c-gone", "c-old", "c-new", "c-s0", "c-s1", "ipamclaim:default/vm1",
                                     "ipamclaim:default/vm2", "c-stranded"};
  REQUIRE(holders(api, "blue-192.0.2.0-24") == all);
  const std::string rv_before = api.get("ippools", "kube-system", "blue-192.0.2.0-24");

  auto reconcile = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {test::plumb_binary(), "reconcile", "--kubeconfig", kubeconfig, "--namespace", "kube-system"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return test::run(argv, {}, "");
  };
  Proc dry = reconcile({"--dry-run"});
  INFO("dry run: ", dry.out, dry.err);
  REQUIRE(dry.exit_code == 0);
  auto would = lines_with(dry.out, "would release ");
  for (const char* stale : {"container c-gone", "container c-old", "container c-stranded", "container ipamclaim:default/vm2",
                            "container e-gone", "container e-x", "slice 198.51.100.0/28"}) {
    CHECK_MESSAGE(mentions(would, stale), stale);
  }
  for (const char* live : {"container c-web ", "container c-new ", "container c-s0 ", "container c-s1 ",
                           "container ipamclaim:default/vm1 ", "container e-web "}) {
    CHECK_MESSAGE(!mentions(would, live), live);
  }
  CHECK(api.get("ippools", "kube-system", "blue-192.0.2.0-24") == rv_before);  // a dry run writes nothing
  CHECK(etcd_holders(**ea).size() == 3);

  Proc real = reconcile({});
  INFO("run: ", real.out, real.err);
  REQUIRE(real.exit_code == 0);
  CHECK(lines_with(real.out, "released ").size() == would.size());
  CHECK(holders(api, "blue-192.0.2.0-24") ==
        std::set<std::string>{"c-web", "c-new", "c-s0", "c-s1", "ipamclaim:default/vm1"});
  // Reservations went with their allocations; the live ones' stay.
  std::set<std::string> reserved;
  for (auto& f : test::PodFixture::files_under(api.dir() + "/objects/overlappingrangeipreservations/kube-system")) {
    reserved.insert(doc(test::read_file(f))["spec"]["containerid"].GetString());
  }
  CHECK(reserved == std::set<std::string>{"c-web", "c-new", "c-s0", "c-s1", "ipamclaim:default/vm1"});
  auto nsp = wb::decode_slice_pool(doc(api.get("nodeslicepools", "kube-system", "green")), "green");
  REQUIRE(nsp.has_value());
  CHECK(nsp->allocations[0].first.empty());      // node-c is gone: its slice is free
  CHECK(nsp->allocations[1].first == "node-b");  // node-b and node-a stay
  CHECK(nsp->allocations[2].first == "node-a");
  CHECK(etcd_holders(**ea) == std::set<std::string>{"e-web"});

  Proc again = reconcile({});
  INFO("again: ", again.out, again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(lines_with(again.out, "released ").empty());
  CHECK(again.out.find("0 released") != std::string::npos);
}

TEST_CASE("plumb reconcile without a readable cluster view releases nothing; bad arguments are usage errors") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  api.set_tokens({"tok"});
  const std::string kubeconfig = node.dir() + "/kubeconfig";
  api.write_kubeconfig(kubeconfig, "token: tok");
  ipam::ClusterAccess access{kubeconfig, {}, "kube-system"};
  auto k = cl::make_kube(*cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24"})")), "node-a", &access);
  REQUIRE(k.has_value());
  REQUIRE((*k)->add(request("c1", "web")).has_value());  // no pod object: stale, if pods could be listed
  api.set_faults(R"([{"match": "^GET /api/v1/pods", "action": "fail", "code": 403}])");
  Proc r = test::run({test::plumb_binary(), "reconcile", "--kubeconfig", kubeconfig, "--namespace", "kube-system"}, {}, "");
  INFO(r.out, r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("nothing released") != std::string::npos);
  CHECK(holders(api, "192.0.2.0-24") == std::set<std::string>{"c1"});
  Proc usage = test::run({test::plumb_binary(), "reconcile", "--frobnicate"}, {}, "");
  CHECK(usage.exit_code == 2);
  CHECK(usage.err.find("--frobnicate") != std::string::npos);
}
