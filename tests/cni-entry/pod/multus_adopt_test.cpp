// Adopting a node from Multus (cni-entry/pod/multus_adopt.cpp), through the real plumb binary: a
// pod the reference plugins really attached as Multus runs them (through libcni: name,
// cniVersion, prevResult and declared capabilities injected, Multus's CNI_ARGS), with Multus's
// and libcni's caches written in their format (tests/fixtures/multus/README.md), is torn down by
// plumb's DEL, or by its GC, until the node is exactly as before the ADD; a delegate whose DEL
// fails keeps Multus's cache for the next DEL.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "engine/base/base64.hpp"
#include "tests/support/node_snapshot.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::Node;
using plumb::test::NodeSnapshot;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::sh;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

const std::string kCaps = R"({"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]})";

std::string dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

/// The node as NodeSnapshot reads it, without the iptables-nft rules' packet counters (the
/// reference plugins' rules count whatever the kernel sends meanwhile, IPv6 router solicitations
/// included: not a change).
NodeSnapshot node_state(const Node& node) {
  NodeSnapshot s = NodeSnapshot::take(node.dir(), {"p1"});
  s.kernel = std::regex_replace(s.kernel, std::regex("counter packets [0-9]+ bytes [0-9]+"), "counter");
  return s;
}

std::string multus_args(const std::string& cid) {
  return "IgnoreUnknown=true;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=" + cid +
         ";K8S_POD_UID=uid-" + cid;
}

/// libcni's AddNetworkList / DelNetworkList of `config` (a conflist, or one config when not
/// `conflist`) with the reference plugins, as Multus calls it; ADD returns the chain's result.
std::string libcni(const std::string& command, const std::string& config, bool conflist, const std::string& cid,
                   const std::string& netns, const std::string& ifname, const std::string& prev_result = {}) {
  rapidjson::Document d;
  d.Parse(config.c_str());
  REQUIRE(d.IsObject());
  std::vector<rapidjson::Value*> plugins;
  if (conflist) {
    for (auto& p : d["plugins"].GetArray()) plugins.push_back(&p);
  } else {
    plugins.push_back(&d);
  }
  if (command == "DEL") std::reverse(plugins.begin(), plugins.end());
  std::string prev = prev_result;
  for (rapidjson::Value* p : plugins) {
    rapidjson::Document one;
    one.CopyFrom(*p, one.GetAllocator());
    auto& a = one.GetAllocator();
    one.RemoveMember("name");
    one.RemoveMember("cniVersion");
    one.AddMember("name", rapidjson::Value(d["name"], a), a);
    one.AddMember("cniVersion", rapidjson::Value(d["cniVersion"], a), a);
    if (!prev.empty()) {
      rapidjson::Document pr;
      pr.Parse(prev.c_str());
      one.AddMember("prevResult", rapidjson::Value(pr, a), a);
    }
    if (one.HasMember("capabilities")) {
      rapidjson::Document caps;
      caps.Parse(kCaps.c_str());
      one.AddMember("runtimeConfig", rapidjson::Value(caps, a), a);
    }
    const std::string type = one["type"].GetString();
    Proc r = plumb::test::run({"/usr/lib/cni/" + type},
                              {{"CNI_COMMAND", command},
                               {"CNI_CONTAINERID", cid},
                               {"CNI_NETNS", netns},
                               {"CNI_IFNAME", ifname},
                               {"CNI_ARGS", multus_args(cid)},
                               {"CNI_PATH", "/usr/lib/cni"}},
                              dump(one));
    INFO(type << " " << command << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    if (command == "ADD") prev = r.out;
  }
  return command == "ADD" ? prev : std::string();
}

/// The pod of tests/fixtures/multus: the cluster network (bridge + portmap, eth0) and the NAD
/// default/macvlan-a (macvlan, net1).
struct MultusPod {
  std::string cluster, macvlan;

  explicit MultusPod(const Node& node) {
    const std::string hl = node.dir() + "/host-local";
    cluster =
        R"({"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"bridge","bridge":"mbr0","isGateway":true,"ipMasq":true,)"
        R"("ipam":{"type":"host-local","subnet":"192.0.2.0/24","dataDir":")" +
        hl +
        R"("}},)"
        R"({"type":"portmap","capabilities":{"portMappings":true}}]})";
    macvlan = R"({"cniVersion":"0.4.0","name":"macvlan-a","type":"macvlan","master":"m0","mode":"bridge",)"
              R"("ipam":{"type":"host-local","subnet":"198.51.100.0/24","dataDir":")" +
              hl + R"("}})";
  }

  /// Multus's ADD of the pod: the delegates' ADD through libcni, then Multus's and libcni's caches
  /// under `multus` (its cniDir) from the fixtures.
  void attach(const std::string& multus, const std::string& cid, const std::string& netns) const {
    const std::string r0 = libcni("ADD", cluster, true, cid, netns, "eth0");
    const std::string r1 = libcni("ADD", macvlan, false, cid, netns, "net1");
    auto fill = [&](std::string s) {
      s = replace_all(s, "@BYTES_CLUSTER@", plumb::base64::encode(cluster));
      s = replace_all(s, "@BYTES_MACVLAN@", plumb::base64::encode(macvlan));
      s = replace_all(s, "@RESULT_CLUSTER@", r0);
      s = replace_all(s, "@RESULT_MACVLAN@", r1);
      s = replace_all(s, "@UID@", "uid-" + cid);
      s = replace_all(s, "@NETNS@", netns);
      return replace_all(s, "@CID@", cid);
    };
    const std::string fixtures = std::string(plumb::test::fixtures_dir()) + "/multus/";
    write_file(multus + "/" + cid, fill(read_file(fixtures + "delegates.json")));
    write_file(multus + "/results/cluster-" + cid + "-eth0", fill(read_file(fixtures + "result-cluster.json")));
    write_file(multus + "/results/macvlan-a-" + cid + "-net1", fill(read_file(fixtures + "result-macvlan.json")));
  }

  /// What the reference plugins leave for good after a pod (the bridge with its address, the
  /// iptables-nft tables and portmap's top-level chains, host-local's lock and last-reserved
  /// files): one pod attached and removed by them before the node is read.
  void warm_up(Node& node) const {
    const std::string ns = node.add_netns("warm");
    libcni("ADD", cluster, true, "warm", ns, "eth0");
    libcni("ADD", macvlan, false, "warm", ns, "net1");
    libcni("DEL", macvlan, false, "warm", ns, "net1");
    libcni("DEL", cluster, true, "warm", ns, "eth0");
    node.del_netns("warm");
  }
};

/// A node adopted from Multus: m0 (macvlan's master, a veth end), Multus's cniDir with its results/
/// directory, the reference plugins' lasting state made by a warm-up pod, plumb's state directory.
struct AdoptedNode {
  Node node;
  PodFixture fx{node};
  MultusPod pod{node};
  std::string multus = node.dir() + "/multus";

  AdoptedNode() {
    REQUIRE(sh("ip link add m0 type veth peer name m1 && ip link set m0 up").exit_code == 0);
    fs::create_directories(multus + "/results");
    pod.warm_up(node);
    // plumb has taken the node over: its state directory exists (a first DEL of nothing makes it).
    REQUIRE(fx.run("DEL", "none", "", "default", "web", config()).exit_code == 0);
  }
  std::string config(const std::string& extra = {}) const {
    return fx.config(R"("multusCacheDir": ")" + multus + "\"" + (extra.empty() ? "" : ", " + extra), "1.1.0");
  }
};

}  // namespace

TEST_CASE("DEL of a sandbox Multus attached tears down every delegate from Multus's cache") {
  AdoptedNode n;
  const std::string netns = n.node.add_netns("p1");
  const auto before = node_state(n.node);
  n.pod.attach(n.multus, "c1", netns);
  REQUIRE(plumb::test::link_names("p1").contains("eth0"));
  REQUIRE(plumb::test::link_names("p1").contains("net1"));
  REQUIRE(sh("nft list ruleset | grep -c 'dport 8080'").out != "0\n");

  Proc del = n.fx.run("DEL", "c1", netns, "default", "web", n.config(R"("runtimeConfig": )" + kCaps));
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);
  PLUMB_CHECK_UNCHANGED(before, node_state(n.node));
  // a second DEL finds nothing to do (Multus's cache went with the first)
  CHECK(n.fx.run("DEL", "c1", netns, "default", "web", n.config()).exit_code == 0);
}

TEST_CASE("GC tears down a sandbox Multus attached that is not among the valid attachments, and keeps a valid one") {
  AdoptedNode n;
  const std::string netns = n.node.add_netns("p1");
  const std::string kept_ns = n.node.add_netns("p2");
  const auto before = node_state(n.node);
  n.pod.attach(n.multus, "c1", netns);
  REQUIRE(plumb::test::link_names("p1").contains("net1"));
  // c2 is still running: GC must leave it (its addresses differ, so it is attached after the snapshot)
  n.pod.attach(n.multus, "c2", kept_ns);

  const std::string conf = n.config(R"("cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}])");
  Proc gc =
      plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}}, conf);
  INFO(gc.out << gc.err);
  CHECK(gc.exit_code == 0);
  CHECK(fs::exists(n.multus + "/c2"));
  CHECK(plumb::test::link_names("p2").contains("net1"));
  // c2 removed by Multus's own way (libcni's DEL) gives back the node before c1's ADD
  libcni("DEL", n.pod.macvlan, false, "c2", kept_ns, "net1");
  libcni("DEL", n.pod.cluster, true, "c2", kept_ns, "eth0");
  fs::remove(n.multus + "/c2");
  fs::remove(n.multus + "/results/cluster-c2-eth0");
  fs::remove(n.multus + "/results/macvlan-a-c2-net1");
  PLUMB_CHECK_UNCHANGED(before, node_state(n.node));
}

TEST_CASE("a delegate whose DEL fails keeps Multus's cache, and the next DEL finishes the job") {
  AdoptedNode n;
  const std::string netns = n.node.add_netns("p1");
  const auto before = node_state(n.node);
  n.pod.attach(n.multus, "c1", netns);
  // The plugins but portmap: the cluster network's chain fails at its first DEL (portmap's).
  const std::string bin = n.node.dir() + "/bin";
  fs::create_directories(bin);
  for (const char* p : {"bridge", "host-local", "macvlan"})
    fs::create_symlink(std::string("/usr/lib/cni/") + p, bin + "/" + p);
  const std::string conf = n.config(R"("binDir": ")" + bin + R"(", "runtimeConfig": )" + kCaps);
  Proc failed =
      n.fx.run_with(plumb::test::plumb_binary(), {{"CNI_PATH", bin}}, "DEL", "c1", netns, "default", "web", conf);
  CHECK(failed.exit_code != 0);
  CHECK(failed.out.find("portmap") != std::string::npos);
  CHECK(fs::exists(n.multus + "/c1"));                       // kept for the next DEL
  CHECK(fs::exists(n.multus + "/results/cluster-c1-eth0"));  // the failed delegate's result too
  CHECK_FALSE(
      fs::exists(n.multus + "/results/macvlan-a-c1-net1"));  // the one whose DEL succeeded: gone, as libcni's cacheDel
  CHECK_FALSE(plumb::test::link_names("p1").contains("net1"));

  Proc del = n.fx.run("DEL", "c1", netns, "default", "web", n.config(R"("runtimeConfig": )" + kCaps));
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);
  fs::remove_all(bin);
  PLUMB_CHECK_UNCHANGED(before, node_state(n.node));
}
