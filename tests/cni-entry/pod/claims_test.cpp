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
  CHECK(read_file(fx.store() + "/ipamclaims/default/vm-a.blue.status.json") == R"({"ips":["198.51.100.2/24"]})");

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

TEST_CASE("a claim on a whereabouts network follows the pod from node A to node B; GC releases it once the claim is gone") {
  Node node;
  KubeCluster c(node);
  // whereabouts with no etcd key: its pool is an IPPool in the API, reached with plumb's own
  // credentials. "Node A" and "node B" are two plumb state directories and node names.
  c.add_nad("default", "blue",
            R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue", "ipam": {"type": "whereabouts",
                "range": "198.51.100.0/24", "network_name": "blue"}})");
  c.api.put("ipamclaims", "default", "vm-a.blue", claim_obj("vm-a.blue", ""));
  c.add_pod("default", "vm-a", "uid-1", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  const std::string conf_a = c.config(R"("whereaboutsNamespace": "kube-system")");
  std::string conf_b = conf_a;
  conf_b.replace(conf_b.find(c.fx.state()), c.fx.state().size(), node.dir() + "/state-b");
  const std::map<std::string, std::string> on_a = {{"NODE_NAME", "node-a"}}, on_b = {{"NODE_NAME", "node-b"}};
  std::string ns = node.add_netns("vm-a");

  Proc add = c.run("ADD", "ctr-1", ns, "default", "vm-a", "uid-1", conf_a, on_a);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  auto first = addrs("vm-a", "net1");
  REQUIRE(first.size() == 1);
  const std::string addr = *first.begin();
  CHECK(claim_ips(c, "vm-a.blue") == addr);
  const std::string pool = c.api.get("ippools", "kube-system", "blue-198.51.100.0-24");
  CHECK(pool.find(R"("id":"ipamclaim:default/vm-a.blue")") != std::string::npos);

  // Node A loses the pod (its DEL leaves the claim's address); the pod is re-created on node B.
  REQUIRE(c.run("DEL", "ctr-1", ns, "default", "vm-a", "uid-1", conf_a, on_a).exit_code == 0);
  node.del_netns("vm-a");
  std::string ns_b = node.add_netns("vm-a-b");
  c.add_pod("default", "vm-a", "uid-2", {{"k8s.v1.cni.cncf.io/networks", kSelection}});
  Proc add_b = c.run("ADD", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b);
  INFO("node B: ", add_b.out, add_b.err);
  REQUIRE(add_b.exit_code == 0);
  CHECK(addrs("vm-a-b", "net1") == std::set<std::string>{addr});
  CHECK(c.api.count("PATCH", kClaimStatus) == 1);  // written once, by node A
  Proc check_b = c.run("CHECK", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b);
  INFO("check: ", check_b.out);
  CHECK(check_b.exit_code == 0);

  // A plain pod on node B never gets the claim's address.
  c.add_pod("default", "plain", "uid-p", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  std::string plain = node.add_netns("plain");
  REQUIRE(c.run("ADD", "ctr-p", plain, "default", "plain", "uid-p", conf_b, on_b).exit_code == 0);
  CHECK(addrs("plain", "net1") != std::set<std::string>{addr});

  // The claim is deleted; node A's GC (the last node that recorded it) releases the address.
  REQUIRE(c.run("DEL", "ctr-2", ns_b, "default", "vm-a", "uid-2", conf_b, on_b).exit_code == 0);
  c.api.remove("ipamclaims", "default", "vm-a.blue");
  Proc gc = plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"NODE_NAME", "node-a"}},
                             with_valid(c.config(R"("whereaboutsNamespace": "kube-system")", "1.1.0"), "[]"));
  INFO("gc: ", gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  const std::string after = c.api.get("ippools", "kube-system", "blue-198.51.100.0-24");
  CHECK(after.find("ipamclaim:default/vm-a.blue") == std::string::npos);
  CHECK(after.find(R"("id":"ctr-p")") != std::string::npos);  // the plain pod's stays
}
