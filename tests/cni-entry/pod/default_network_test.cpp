// The pod's default networks as Multus chooses them (cni-entry/pod/default_network.cpp), through
// the real plumb binary in private node namespaces: clusterNetwork as the "name" of a CNI config
// in confDir (and a NAD of that name winning), the v1.multus-cni.io/default-network annotation,
// Multus's "delegates", defaultNetworks skipped for systemNamespaces pods, namespaceIsolation with
// and without globalNamespaces, and interface names net<N> by position.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::ipv4_of;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

std::string bridge_conf(const std::string& name, const std::string& bridge, const std::string& subnet, const std::string& ipam_dir) {
  return R"({"cniVersion": "1.0.0", "name": ")" + name + R"(", "type": "bridge", "bridge": ")" + bridge +
         R"(", "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

/// plumb's config without clusterNetwork: `members` says where the default network comes from.
std::string conf_with(const PodFixture& fx, const Node& node, const std::string& members) {
  return R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "storeDir": ")" + fx.store() + R"(", "stateDir": ")" +
         fx.state() + R"(", "confDir": ")" + node.dir() + R"(/net.d", "logLevel": "debug", )" + members + "}";
}

/// The "name" of each network-status entry, in order.
std::vector<std::string> status_names(const PodFixture& fx, const std::string& ns, const std::string& pod) {
  rapidjson::Document d;
  d.Parse(fx.status_of(ns, pod).c_str());
  std::vector<std::string> out;
  if (!d.IsArray()) return out;
  for (auto& e : d.GetArray()) out.push_back(std::string(e["name"].GetString()) + "@" + e["interface"].GetString());
  return out;
}

}  // namespace

TEST_CASE("clusterNetwork names a CNI config in confDir by its \"name\"; a NAD of that name in multusNamespace wins") {
  Node node;
  PodFixture fx(node);
  plumb::test::write_file(node.dir() + "/net.d/10-primary.conf", bridge_conf("primary", "br-primary", "192.0.2.0/24", fx.ipam_dir()));
  plumb::test::write_file(node.dir() + "/net.d/20-other.conf", bridge_conf("other", "br-other", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  const std::string conf = conf_with(fx, node, R"("clusterNetwork": "primary")");
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", conf);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "eth0") == "192.0.2.2/24");
  CHECK(status_names(fx, "default", "web") == std::vector<std::string>{"primary@eth0"});
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", conf).exit_code == 0);

  // A NAD "primary" in kube-system is found first (Multus's getNetDelegate order); its status
  // name is namespace/name.
  fx.add_nad("kube-system", "primary", bridge_conf("nad-primary", "br-nad", "203.0.113.0/24", fx.ipam_dir()));
  Proc add2 = fx.run("ADD", "ctr-2", pod, "default", "web", conf);
  INFO(add2.out, add2.err);
  REQUIRE(add2.exit_code == 0);
  CHECK(ipv4_of("web", "eth0") == "203.0.113.2/24");
  CHECK(status_names(fx, "default", "web") == std::vector<std::string>{"kube-system/primary@eth0"});
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", conf).exit_code == 0);

  // Neither: an error naming both places.
  Proc missing = fx.run("ADD", "ctr-3", pod, "default", "web", conf_with(fx, node, R"("clusterNetwork": "nowhere")"));
  CHECK(missing.exit_code != 0);
  CHECK(missing.out.find("plumb config.clusterNetwork: \\\"nowhere\\\" has no NetworkAttachmentDefinition kube-system/nowhere") !=
        std::string::npos);
  CHECK(missing.out.find("no CNI config named \\\"nowhere\\\" in confDir " + node.dir() + "/net.d") != std::string::npos);
}

TEST_CASE("the v1.multus-cni.io/default-network annotation replaces the cluster default network for that pod") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("kube-system", "alt", bridge_conf("alt", "br-alt", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("default", "blue", bridge_conf("blue", "br-blue", "192.0.2.0/24", fx.ipam_dir()));
  plumb::test::write_file(fx.store() + "/pods/default/web.yaml",
                          "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n"
                          "    v1.multus-cni.io/default-network: alt\n    k8s.v1.cni.cncf.io/networks: blue\n");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "eth0") == "198.51.100.2/24");  // from kube-system/alt, not the cluster default
  CHECK(ipv4_of("web", "net1") == "192.0.2.2/24");
  CHECK(status_names(fx, "default", "web") == std::vector<std::string>{"kube-system/alt@eth0", "default/blue@net1"});
  CHECK(fx.status_of("default", "web").find(R"("name":"kube-system/alt","interface":"eth0")") != std::string::npos);
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);

  plumb::test::write_file(fx.store() + "/pods/default/two.yaml",
                          "apiVersion: v1\nkind: Pod\nmetadata:\n  name: two\n  namespace: default\n  annotations:\n"
                          "    v1.multus-cni.io/default-network: alt,default/blue\n");
  Proc two = fx.run("ADD", "ctr-2", node.add_netns("two"), "default", "two", fx.config());
  CHECK(two.exit_code != 0);
  CHECK(two.out.find(R"("code":103)") != std::string::npos);
  CHECK(two.out.find("names 2 networks: exactly one must be given") != std::string::npos);
}

TEST_CASE("the default-network annotation's interface, mac and ips are applied as Multus applies them to its master plugin") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("kube-system", "alt", bridge_conf("alt", "br-alt", "198.51.100.0/24", fx.ipam_dir()));
  plumb::test::write_file(fx.store() + "/pods/default/web.yaml",
                          "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n"
                          "    v1.multus-cni.io/default-network: '[{\"name\": \"alt\", \"interface\": \"ext0\", "
                          "\"mac\": \"02:00:00:00:00:42\", \"ips\": [\"198.51.100.77\"]}]'\n");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "ext0"});  // not CNI_IFNAME's eth0
  CHECK(ipv4_of("web", "ext0") == "198.51.100.77/24");                // CNI_ARGS IP= to host-local
  CHECK(std::string(ip_json("-n web link show dev ext0")[0]["address"].GetString()) == "02:00:00:00:00:42");  // CNI_ARGS MAC=
  CHECK(status_names(fx, "default", "web") == std::vector<std::string>{"kube-system/alt@ext0"});
  // The runtime repeats the ADD: the recorded result, nothing made twice.
  Proc again = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  CHECK(again.exit_code == 0);
  CHECK(again.out == add.out);
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});

  plumb::test::write_file(fx.store() + "/pods/default/bad.yaml",
                          "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n  namespace: default\n  annotations:\n"
                          "    v1.multus-cni.io/default-network: '[{\"name\": \"alt\", \"interface\": \"a/b\"}]'\n");
  Proc bad = fx.run("ADD", "ctr-2", node.add_netns("bad"), "default", "bad", fx.config());
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("interface") != std::string::npos);
  CHECK(bad.out.find("a/b") != std::string::npos);
  CHECK(link_names("bad") == std::set<std::string>{"lo"});
}

TEST_CASE("Multus's delegates: the first is the default network, the others attached as net1..; ignored with clusterNetwork") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  const std::string delegates = R"("delegates": [)" + bridge_conf("d0", "br-d0", "192.0.2.0/24", fx.ipam_dir()) + ", " +
                                bridge_conf("d1", "br-d1", "198.51.100.0/24", fx.ipam_dir()) + "]";
  const std::string conf = conf_with(fx, node, delegates);
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", conf);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(ipv4_of("web", "eth0") == "192.0.2.2/24");
  CHECK(ipv4_of("web", "net1") == "198.51.100.2/24");
  CHECK(status_names(fx, "default", "web") == std::vector<std::string>{"d0@eth0", "d1@net1"});
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", conf).exit_code == 0);

  // With clusterNetwork set, delegates are ignored (Multus: the two are mutually exclusive).
  std::string both = fx.config(delegates);
  Proc add2 = fx.run("ADD", "ctr-2", pod, "default", "web", both);
  REQUIRE(add2.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0"});
  CHECK(ipv4_of("web", "eth0") == "203.0.113.2/24");
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", both).exit_code == 0);

  Proc none = fx.run("ADD", "ctr-3", pod, "default", "web", conf_with(fx, node, R"("defaultNetworks": [])"));
  CHECK(none.exit_code != 0);
  CHECK(none.out.find("clusterNetwork (or Multus's delegates) is required") != std::string::npos);
}

TEST_CASE("defaultNetworks are attached to every pod but those in systemNamespaces") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("kube-system", "side", bridge_conf("side", "br-side", "198.51.100.0/24", fx.ipam_dir()));
  const std::string conf = fx.config(R"("defaultNetworks": ["side"], "systemNamespaces": ["kube-system", "infra"])");
  fx.add_pod("default", "app", "");
  fx.add_pod("infra", "dns", "");
  std::string app = node.add_netns("app"), dns = node.add_netns("dns");
  REQUIRE(fx.run("ADD", "ctr-app", app, "default", "app", conf).exit_code == 0);
  CHECK(link_names("app") == std::set<std::string>{"lo", "eth0", "net1"});
  Proc sys = fx.run("ADD", "ctr-dns", dns, "infra", "dns", conf);
  INFO(sys.out, sys.err);
  REQUIRE(sys.exit_code == 0);
  CHECK(link_names("dns") == std::set<std::string>{"lo", "eth0"});  // Multus adds no defaultNetworks here
  REQUIRE(fx.run("DEL", "ctr-app", app, "default", "app", conf).exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-dns", dns, "infra", "dns", conf).exit_code == 0);
}

TEST_CASE("namespaceIsolation: \"default\" is usable from any namespace only while globalNamespaces is not set") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "blue", bridge_conf("blue", "br-blue", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("infra", "green", bridge_conf("green", "br-green", "192.0.2.0/24", fx.ipam_dir()));
  fx.add_pod("team-a", "web", "default/blue");
  fx.add_pod("team-a", "api", "infra/green");
  std::string web = node.add_netns("web"), api = node.add_netns("api");
  const std::string isolated = fx.config(R"("namespaceIsolation": true)");
  Proc implicit = fx.run("ADD", "ctr-web", web, "team-a", "web", isolated);
  INFO(implicit.out, implicit.err);
  CHECK(implicit.exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-web", web, "team-a", "web", isolated).exit_code == 0);

  const std::string global = fx.config(R"("namespaceIsolation": true, "globalNamespaces": "infra")");
  Proc refused = fx.run("ADD", "ctr-web", web, "team-a", "web", global);
  CHECK(refused.exit_code != 0);
  CHECK(refused.out.find("may not use NetworkAttachmentDefinition default/blue") != std::string::npos);
  Proc allowed = fx.run("ADD", "ctr-api", api, "team-a", "api", global);
  INFO(allowed.out, allowed.err);
  CHECK(allowed.exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-api", api, "team-a", "api", global).exit_code == 0);
}

TEST_CASE("interface names are net<N> by the element's position in the pod, as Multus names them") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "a", bridge_conf("a", "br-a", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("default", "b", bridge_conf("b", "br-b", "192.0.2.0/24", fx.ipam_dir()));
  fx.add_nad("kube-system", "side", bridge_conf("side", "br-side", "203.0.113.128/25", fx.ipam_dir()));
  fx.add_pod("default", "web", R"([{"name":"a","interface":"x0"},{"name":"b"}])");
  std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "x0", "net2"});  // the issue's example
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);

  // defaultNetworks count too: side is net1, a is x0, b is net3.
  const std::string with_default = fx.config(R"("defaultNetworks": ["side"])");
  REQUIRE(fx.run("ADD", "ctr-2", pod, "default", "web", with_default).exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1", "x0", "net3"});
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", with_default).exit_code == 0);

  // A generated name another element asks for explicitly: refused before anything is made.
  fx.add_pod("default", "clash", R"([{"name":"a"},{"name":"b","interface":"net1"}])");
  Proc clash = fx.run("ADD", "ctr-3", node.add_netns("clash"), "default", "clash", fx.config());
  CHECK(clash.exit_code != 0);
  CHECK(clash.out.find(R"(interface \"net1\" is already used by a previous attachment)") != std::string::npos);
}
