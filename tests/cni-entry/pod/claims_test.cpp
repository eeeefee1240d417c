// IPAMClaims (NPWG v1.3 section 8, "ipam-claim-reference") end to end with the real plumb
// binary: the claim's addresses are allocated once and written to status.ips, survive the pod's
// DEL, go to the re-created pod, and are released only when the claim is gone and GC runs; with
// the API test server and with the local store.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/support/kube_cluster.hpp"

using plumb::test::address_files;
using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::write_file;

namespace {

const std::string kClaimStatus = "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/default/ipamclaims/vm-a.blue/status";

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  return d;
}

std::set<std::string> addrs(const std::string& ns, const std::string& ifname) {
  auto d = plumb::test::ip_json("-n " + ns + " addr show dev " + ifname);
  std::set<std::string> out;
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (std::string(a["scope"].GetString()) == "global") {
        out.insert(std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt()));
      }
    }
  }
  return out;
}

std::string claim_obj(const std::string& name, const std::string& status_ips) {
  return R"({"apiVersion": "k8s.cni.cncf.io/v1alpha1", "kind": "IPAMClaim", "metadata": {"name": ")" + name +
         R"(", "namespace": "default", "uid": "claim-uid", "resourceVersion": "5"}, "spec": {"network": "blue", "interface": "net1"})" +
         (status_ips.empty() ? std::string() : R"(, "status": {"ips": )" + status_ips + "}") + "}";
}

/// The claim's status.ips as stored by the API server, joined with ','.
std::string claim_ips(const KubeCluster& c, const std::string& name) {
  auto d = parse(c.api.get("ipamclaims", "default", name));
  if (!d.IsObject() || !d.HasMember("status") || !d["status"].HasMember("ips")) return {};
  std::string out;
  for (auto& ip : d["status"]["ips"].GetArray()) out += (out.empty() ? "" : ",") + std::string(ip.GetString());
  return out;
}

const std::string kSelection = R"([{"name": "blue", "ipam-claim-reference": "vm-a.blue"}])";

/// GC config: the base config plus the valid attachments.
std::string with_valid(const std::string& conf, const std::string& valid_json) {
  return conf.substr(0, conf.rfind('}')) + R"(, "cni.dev/valid-attachments": )" + valid_json + "}";
}

std::string blue_file(const KubeCluster& c, const std::string& ip) {
  return read_file(c.fx.ipam_dir() + "/blue/" + ip);
}

}  // namespace

TEST_CASE("an IPAMClaim keeps its address across pod delete and re-create and loses it after deletion and GC") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.api.put("ipamclaims", "default", "vm-a.blue", claim_obj("vm-a.blue", ""));
  c.add_pod("default", "vm-a", "uid-1", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  std::string ns = node.add_netns("vm-a");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "vm-a", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(addrs("vm-a", "net1") == std::set<std::string>{"198.51.100.2/24"});
  CHECK(claim_ips(c, "vm-a.blue") == "198.51.100.2/24");
  CHECK(c.api.count("PATCH", kClaimStatus, "200") == 1);
  CHECK(blue_file(c, "198.51.100.2").rfind("ipamclaim:default/vm-a.blue\r\n", 0) == 0);

  // The pod goes away: its own addresses are released, the claim's stay.
  REQUIRE(c.run("DEL", "ctr-1", ns, "default", "vm-a", "uid-1", c.config()).exit_code == 0);
  CHECK(link_names("vm-a") == std::set<std::string>{"lo"});
  CHECK(address_files(c.fx.ipam_dir()) == std::vector<std::string>{c.fx.ipam_dir() + "/blue/198.51.100.2"});

  // A pod without the claim gets the next address; the re-created pod gets the claim's.
  c.add_pod("default", "plain", "uid-p", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  std::string plain = node.add_netns("plain");
  REQUIRE(c.run("ADD", "ctr-p", plain, "default", "plain", "uid-p", c.config()).exit_code == 0);
  CHECK(addrs("plain", "net1") == std::set<std::string>{"198.51.100.3/24"});

  c.add_pod("default", "vm-a", "uid-2", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  Proc again = c.run("ADD", "ctr-2", ns, "default", "vm-a", "uid-2", c.config());
  INFO("again: ", again.out, again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(addrs("vm-a", "net1") == std::set<std::string>{"198.51.100.2/24"});
  CHECK(c.api.count("PATCH", kClaimStatus) == 1);  // status.ips was set: nothing more to write
  Proc check = c.run("CHECK", "ctr-2", ns, "default", "vm-a", "uid-2", c.config());
  INFO("check: ", check.out);
  CHECK(check.exit_code == 0);

  // GC while the claim exists keeps its address, even with the pod gone.
  REQUIRE(c.run("DEL", "ctr-2", ns, "default", "vm-a", "uid-2", c.config()).exit_code == 0);
  std::string valid = R"([{"containerID": "ctr-p", "ifname": "eth0"}])";
  Proc gc1 = c.gc(with_valid(c.config({}, "1.1.0"), valid));
  INFO("gc1: ", gc1.out, gc1.err);
  CHECK(gc1.exit_code == 0);
  CHECK_FALSE(blue_file(c, "198.51.100.2").empty());

  // The claim is deleted: GC releases its address and nothing else.
  c.api.remove("ipamclaims", "default", "vm-a.blue");
  Proc gc2 = c.gc(with_valid(c.config({}, "1.1.0"), valid));
  INFO("gc2: ", gc2.out, gc2.err);
  CHECK(gc2.exit_code == 0);
  CHECK(blue_file(c, "198.51.100.2").empty());
  CHECK(address_files(c.fx.ipam_dir() + "/blue") == std::vector<std::string>{c.fx.ipam_dir() + "/blue/198.51.100.3"});
  CHECK(plumb::test::PodFixture::files_under(c.fx.state() + "/ipamclaims/default").empty());
}

TEST_CASE("a claim whose status.ips is set gets exactly those addresses") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.api.put("ipamclaims", "default", "vm-a.blue", claim_obj("vm-a.blue", R"(["198.51.100.50/24"])"));
  c.add_pod("default", "vm-a", "uid-1", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  std::string ns = node.add_netns("vm-a");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "vm-a", "uid-1", c.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(addrs("vm-a", "net1") == std::set<std::string>{"198.51.100.50/24"});
  CHECK(c.api.count("PATCH", kClaimStatus) == 0);
}

TEST_CASE("a missing claim fails the ADD before anything is attached") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "vm-a", "uid-1", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  std::string ns = node.add_netns("vm-a");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "vm-a", "uid-1", c.config());
  INFO("stdout: ", add.out);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("IPAMClaim default/vm-a.blue") != std::string::npos);
  CHECK(add.out.find("not found") != std::string::npos);
  CHECK(link_names("vm-a") == std::set<std::string>{"lo"});
  CHECK(address_files(c.fx.ipam_dir()).empty());
  CHECK(c.records().empty());
}

TEST_CASE("a NAD cannot make host-local hold addresses for a claim: ownership comes only from the selection") {
  Node node;
  KubeCluster c(node);
  c.add_nad(
      "default", "blue",
      R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue", "ipam": {"type": "host-local", "dataDir": ")" +
          c.fx.ipam_dir() +
          R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]], "plumb.ipamClaim": {"owner": "ipamclaim:other/x"}}})");
  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  std::string ns = node.add_netns("web");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", c.config());
  INFO("stdout: ", add.out);
  REQUIRE(add.exit_code == 0);
  // The key plumb once used internally is an unknown key like any other: the address belongs to
  // the container, not to "ipamclaim:other/x".
  CHECK(plumb::test::read_file(c.fx.ipam_dir() + "/blue/198.51.100.2") == "ctr-1\r\nnet1");
  CHECK(c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", c.config()).exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(c.fx.ipam_dir() + "/blue/198.51.100.2"));
}

TEST_CASE("IPAMClaims in the local store behave the same without an API server") {
  Node node;
  plumb::test::PodFixture fx(node);
  fx.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_pod("default", "vm-a", kSelection);
  write_file(
      fx.store() + "/ipamclaims/default/vm-a.blue.yaml",
      "apiVersion: k8s.cni.cncf.io/v1alpha1\nkind: IPAMClaim\nmetadata:\n  name: vm-a.blue\n  namespace: default\n"
      "spec:\n  network: blue\n  interface: net1\n");
  std::string ns = node.add_netns("vm-a");
  Proc add = fx.run("ADD", "ctr-1", ns, "default", "vm-a", fx.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(addrs("vm-a", "net1") == std::set<std::string>{"198.51.100.2/24"});
  // status as ipamclaims v1alpha1 defines it: ips, ownerPod, an IPsAllocated condition.
  rapidjson::Document status;
  status.Parse(read_file(fx.store() + "/ipamclaims/default/vm-a.blue.status.json").c_str());
  REQUIRE(status.IsObject());
  CHECK(std::string(status["ips"][0].GetString()) == "198.51.100.2/24");
  CHECK(std::string(status["ownerPod"]["name"].GetString()) == "vm-a");
  REQUIRE(status["conditions"].Size() == 1);
  CHECK(std::string(status["conditions"][0]["type"].GetString()) == "IPsAllocated");
  CHECK(std::string(status["conditions"][0]["status"].GetString()) == "True");
  CHECK(std::string(status["conditions"][0]["reason"].GetString()) == "SuccessfulAllocation");
  CHECK(std::string(status["conditions"][0]["lastTransitionTime"].GetString()).size() == 20);

  REQUIRE(fx.run("DEL", "ctr-1", ns, "default", "vm-a", fx.config()).exit_code == 0);
  CHECK_FALSE(read_file(fx.ipam_dir() + "/blue/198.51.100.2").empty());
  // Another pod takes the next address in between; the claim's is still its own.
  fx.add_pod("default", "plain", "blue");
  std::string plain = node.add_netns("plain");
  REQUIRE(fx.run("ADD", "ctr-p", plain, "default", "plain", fx.config()).exit_code == 0);
  CHECK(addrs("plain", "net1") == std::set<std::string>{"198.51.100.3/24"});
  REQUIRE(fx.run("ADD", "ctr-2", ns, "default", "vm-a", fx.config()).exit_code == 0);
  CHECK(addrs("vm-a", "net1") == std::set<std::string>{"198.51.100.2/24"});
  REQUIRE(fx.run("DEL", "ctr-2", ns, "default", "vm-a", fx.config()).exit_code == 0);

  std::string valid = R"([{"containerID": "ctr-p", "ifname": "eth0"}])";
  auto gc = [&] {
    return plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}},
                            with_valid(fx.config({}, "1.1.0"), valid));
  };
  CHECK(gc().exit_code == 0);
  CHECK_FALSE(read_file(fx.ipam_dir() + "/blue/198.51.100.2").empty());
  std::filesystem::remove(fx.store() + "/ipamclaims/default/vm-a.blue.yaml");
  Proc gc2 = gc();
  INFO("gc2: ", gc2.out, gc2.err);
  CHECK(gc2.exit_code == 0);
  CHECK(read_file(fx.ipam_dir() + "/blue/198.51.100.2").empty());
  CHECK_FALSE(read_file(fx.ipam_dir() + "/blue/198.51.100.3").empty());
  CHECK_FALSE(std::filesystem::exists(fx.store() + "/ipamclaims/default/vm-a.blue.status.json"));
}

namespace {

/// A second node for the cross-node case: the named namespace `name`, linked to the test's node by
/// a veth (node 192.0.2.1/30, `name` 192.0.2.2/30) so its plumb reaches the API test server on
/// 192.0.2.1. Returns a wrapper that runs the plumb binary inside it.
std::string second_node(Node& node, const std::string& name) {
  node.add_netns(name);
  Proc link = plumb::test::sh("ip link add nodelink type veth peer name nodelink netns " + name +
                              " && ip addr add 192.0.2.1/30 dev nodelink && ip link set nodelink up"
                              " && ip -n " + name + " addr add 192.0.2.2/30 dev nodelink && ip -n " + name +
                              " link set nodelink up");
  REQUIRE_MESSAGE(link.exit_code == 0, link.err);
  const std::string wrapper = node.dir() + "/plumb-on-" + name;
  write_file(wrapper, "#!/bin/sh\nexec ip netns exec " + name + " " + plumb::test::plumb_binary() + " \"$@\"\n");
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  return wrapper;
}

/// The ids holding addresses in an IPPool as stored by the API server.
std::set<std::string> pool_ids(const KubeCluster& c, const std::string& ns, const std::string& name) {
  auto d = parse(c.api.get("ippools", ns, name));
  std::set<std::string> out;
  if (!d.IsObject() || !d.HasMember("spec") || !d["spec"].HasMember("allocations")) return out;
  for (auto& a : d["spec"]["allocations"].GetObject()) out.insert(a.value["id"].GetString());
  return out;
}

/// Node A (the test's namespace, where the API test server runs) and node B (second_node), both
/// with a NAD "blue" whose whereabouts pool is an IPPool in the API (no etcd key), reached with
/// plumb's own credentials, and the pod vm-a selecting the IPAMClaim vm-a.blue (kSelection).
/// Node B has its own namespace, stateDir, default network and name.
struct ClaimNodes {
  Node& node;
  const std::string plumb_b;
  KubeCluster c;
  const std::string extra = R"("whereaboutsNamespace": "kube-system")";
  const std::string state_b, default_b;
  const std::map<std::string, std::string> on_a = {{"NODE_NAME", "node-a"}}, on_b = {{"NODE_NAME", "node-b"}};

  explicit ClaimNodes(Node& n)
      : node(n),
        plumb_b(second_node(n, "node-b")),
        c(n, "192.0.2.1"),
        state_b(n.dir() + "/state-b"),
        default_b(n.dir() + "/default-b.conflist") {
    c.add_nad("default", "blue",
              R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue", "capabilities": {"ips": true},
                "ipam": {"type": "whereabouts", "range": "198.51.100.0/24", "network_name": "blue"}})");
    c.api.put("ipamclaims", "default", "vm-a.blue", claim_obj("vm-a.blue", ""));
    c.add_pod("default", "vm-a", "uid-1", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
    std::string default_net = read_file(c.fx.default_conflist());
    default_net.replace(default_net.find(c.fx.ipam_dir()), c.fx.ipam_dir().size(), node.dir() + "/ipam-b");
    write_file(default_b, default_net);
  }

  /// A config of node A's as node B's: its stateDir and default network.
  std::string on_node_b(std::string conf) const {
    conf.replace(conf.find(c.fx.state()), c.fx.state().size(), state_b);
    conf.replace(conf.find(c.fx.default_conflist()), c.fx.default_conflist().size(), default_b);
    return conf;
  }
};

/// While the claim's address `addr` is held for a pod gone from node A, no pod on node B takes it:
/// asked for by address it is refused (nothing left behind); a pod that asks for nothing gets
/// another one. Returns the namespace of the pod that asked for it.
std::string check_taken_nowhere_else(ClaimNodes& two, const std::string& conf_b, const std::string& addr) {
  const std::string ip = addr.substr(0, addr.find('/'));
  const std::string pool = "blue-198.51.100.0-24";
  const std::string claim_id = "ipamclaim:default/vm-a.blue";
  const std::string want_it = R"([{"name": "blue", "ips": [")" + addr + R"("]}])";
  two.c.add_pod("default", "thief", "uid-t", {{"k8s.v1.cni.cncf.io/networks", want_it}});
  std::string thief = two.node.add_netns("thief");
  Proc taken = two.c.run("ADD", "ctr-t", thief, "default", "thief", "uid-t", conf_b, two.on_b, two.plumb_b);
  INFO("thief: ", taken.out, taken.err);
  CHECK(taken.exit_code != 0);
  CHECK(taken.out.find("requested IP " + ip + " is already allocated") != std::string::npos);
  CHECK(taken.out.find(claim_id) != std::string::npos);
  CHECK(link_names("thief") == std::set<std::string>{"lo"});
  CHECK(plumb::test::PodFixture::files_under(two.state_b + "/containers").empty());
  two.c.add_pod("default", "plain", "uid-p", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  std::string plain = two.node.add_netns("plain");
  REQUIRE(two.c.run("ADD", "ctr-p", plain, "default", "plain", "uid-p", conf_b, two.on_b, two.plumb_b).exit_code == 0);
  auto plain_addr = addrs("plain", "net1");
  REQUIRE(plain_addr.size() == 1);
  CHECK(*plain_addr.begin() != addr);
  CHECK(pool_ids(two.c, "kube-system", pool) == std::set<std::string>{claim_id, "ctr-p"});
  return thief;
}

}  // namespace

TEST_CASE(
    "a claim on a whereabouts network follows the pod from node A to node B; no pod takes it meanwhile; the claim's "
    "deletion frees it") {
  Node node;
  ClaimNodes two(node);
  KubeCluster& c = two.c;
  const std::string& plumb_b = two.plumb_b;
  const std::string& state_b = two.state_b;
  const std::string& extra = two.extra;
  const auto& on_a = two.on_a;
  const auto& on_b = two.on_b;
  const std::string conf_a = c.config(extra);
  const std::string conf_b = two.on_node_b(conf_a);
  const std::string pool = "blue-198.51.100.0-24";
  const std::string claim_id = "ipamclaim:default/vm-a.blue";
  std::string ns = node.add_netns("vm-a");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "vm-a", "uid-1", conf_a, on_a);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  auto first = addrs("vm-a", "net1");
  REQUIRE(first.size() == 1);
  const std::string addr = *first.begin();
  const std::string ip = addr.substr(0, addr.find('/'));
  CHECK(claim_ips(c, "vm-a.blue") == addr);
  CHECK(pool_ids(c, "kube-system", pool) == std::set<std::string>{claim_id});
  CHECK(c.api.get("overlappingrangeipreservations", "kube-system", "blue-" + ip).find(claim_id) != std::string::npos);

  // Node A loses the pod: its DEL leaves the claim's address held.
  REQUIRE(c.run("DEL", "ctr-1", ns, "default", "vm-a", "uid-1", conf_a, on_a).exit_code == 0);
  node.del_netns("vm-a");
  CHECK(pool_ids(c, "kube-system", pool) == std::set<std::string>{claim_id});

  const std::string thief = check_taken_nowhere_else(two, conf_b, addr);

  // The pod is re-created on node B and gets the claim's address there.
  std::string ns_b = node.add_netns("vm-a-b");
  c.add_pod("default", "vm-a", "uid-2", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  Proc add_b = c.run("ADD", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b, plumb_b);
  INFO("node B: ", add_b.out, add_b.err);
  REQUIRE(add_b.exit_code == 0);
  CHECK(addrs("vm-a-b", "net1") == std::set<std::string>{addr});
  CHECK(link_names("node-b").contains("br-blue"));  // attached by node B's plumb, in node B
  CHECK(c.api.count("PATCH", kClaimStatus) == 1);  // status.ips written once, by node A
  CHECK(pool_ids(c, "kube-system", pool) == std::set<std::string>{claim_id, "ctr-p"});
  Proc check_b = c.run("CHECK", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b, plumb_b);
  INFO("check: ", check_b.out);
  CHECK(check_b.exit_code == 0);

  // The pod goes again, then the claim is deleted: GC on node B (the node that held it last)
  // releases the address and its reservation; node A's GC then only drops its record.
  REQUIRE(c.run("DEL", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b, plumb_b).exit_code == 0);
  c.api.remove("ipamclaims", "default", "vm-a.blue");
  const std::string valid_b = R"([{"containerID": "ctr-p", "ifname": "eth0"}, {"containerID": "ctr-p", "ifname": "net1"}])";
  Proc gc_b =
      plumb::test::run({plumb_b}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}, {"NODE_NAME", "node-b"}},
                       with_valid(two.on_node_b(c.config(extra, "1.1.0")), valid_b));
  INFO("gc B: ", gc_b.out, gc_b.err);
  CHECK(gc_b.exit_code == 0);
  CHECK(pool_ids(c, "kube-system", pool) == std::set<std::string>{"ctr-p"});
  CHECK(c.api.get("overlappingrangeipreservations", "kube-system", "blue-" + ip).empty());
  CHECK(plumb::test::PodFixture::files_under(state_b + "/ipamclaims/default").empty());
  Proc gc_a = c.gc(with_valid(c.config(extra, "1.1.0"), "[]"));
  INFO("gc A: ", gc_a.out, gc_a.err);
  CHECK(gc_a.exit_code == 0);
  CHECK(plumb::test::PodFixture::files_under(c.fx.state() + "/ipamclaims/default").empty());
  CHECK(pool_ids(c, "kube-system", pool) == std::set<std::string>{"ctr-p"});

  // Free now: the pod that asked for it on node B gets it.
  Proc retaken = c.run("ADD", "ctr-t2", thief, "default", "thief", "uid-t", conf_b, on_b, plumb_b);
  INFO("thief again: ", retaken.out, retaken.err);
  REQUIRE(retaken.exit_code == 0);
  CHECK(addrs("thief", "net1") == std::set<std::string>{addr});
}
