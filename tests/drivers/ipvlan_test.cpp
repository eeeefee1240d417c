// The ipvlan driver: configuration errors and, on this machine's kernel (no ipvlan), the clear
// CNI error (host); l2/l3/l3s ipvlans carrying real traffic between namespaces, MTU, the
// default-route master, linkInContainer, CHECK and DEL on Debian's kernel (full-kernel tier).
// Every case drives the real plumb binary in a private node and reads the kernel back with `ip -j`.
#include <doctest/doctest.h>

#include <tuple>

#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb::test;

namespace {

std::string ipvlan_nad(const std::string& extra, const PodFixture& fx) {
  return R"({"cniVersion": "1.0.0", "type": "ipvlan", )" + extra + R"(
   "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(",
            "ranges": [[{"subnet": "198.51.100.0/24", "rangeStart": "198.51.100.10", "rangeEnd": "198.51.100.99"}]]}})";
}

/// A veth pair: `name` in the node (the master), its peer in namespace `peer_ns` with `addr`.
void add_master_with_peer(Node& node, const std::string& name, const std::string& peer_ns, const std::string& addr) {
  node.add_netns(peer_ns);
  REQUIRE(sh("ip link add " + name + " type veth peer name " + name + "p netns " + peer_ns).exit_code == 0);
  REQUIRE(sh("ip link set " + name + " up && ip -n " + peer_ns + " link set " + name + "p up && ip -n " + peer_ns + " addr add " +
             addr + " dev " + name + "p").exit_code == 0);
}

Proc add(const PodFixture& fx, Node& node, const std::string& pod) {
  Proc p = fx.run("ADD", "ctr-" + pod, node.add_netns(pod), "default", pod, fx.config());
  INFO(pod, ": ", p.out, p.err);
  return p;
}


}  // namespace

TEST_CASE("ipvlan config: bad mode, master and mtu are named; no addresses at all is refused") {
  Node node;
  PodFixture fx(node);
  auto expect = [&](const std::string& nad, const std::string& needle) {
    fx.add_nad("default", "ipv", nad);
    fx.add_pod("default", "p", R"([{"name": "ipv"}])");
    Proc p = fx.run("ADD", "ctr-p", node.add_netns("p"), "default", "p", fx.config());
    INFO(p.out, p.err);
    CHECK(p.exit_code != 0);
    CHECK(p.out.find(needle) != std::string::npos);
    CHECK(no_records(fx));
    node.del_netns("p");
  };
  expect(ipvlan_nad(R"("master": "eth0", "mode": "l4",)", fx), R"(unknown ipvlan mode \"l4\")");
  expect(ipvlan_nad(R"("master": "a/b",)", fx), R"(ipv.master \"a/b\")");
  expect(ipvlan_nad(R"("master": "eth0", "mtu": 20,)", fx), "ipv.mtu 20");
  expect(R"({"cniVersion": "1.0.0", "type": "ipvlan", "master": "lo"})", "ipvlan needs addresses");
}

TEST_CASE("ipvlan on this machine's kernel: without ipvlan support the ADD fails naming the missing feature, leaving nothing") {
  Node node;
  PodFixture fx(node);
  add_master_with_peer(node, "ipvm0", "peer", "198.51.100.200/24");
  fx.add_nad("default", "ipv", ipvlan_nad(R"("master": "ipvm0",)", fx));
  fx.add_pod("default", "pod-a", R"([{"name": "ipv", "interface": "ipv0"}])");
  check_feature_or_error(add(fx, node, "pod-a"), "link prbm0 type ipvlan mode l2", "no ipvlan support (CONFIG_IPVLAN", "pod-a", "ipv0", fx);
}

FULL_KERNEL_CASE("ipvlan l2: two pods and a namespace behind the master reach each other; CHECK passes; DEL removes everything") {
  Node node;
  PodFixture fx(node);
  add_master_with_peer(node, "ipvm0", "peer", "198.51.100.200/24");
  fx.add_nad("default", "ipv", ipvlan_nad(R"("master": "ipvm0", "mtu": 1400,)", fx));
  fx.add_pod("default", "pod-a", R"([{"name": "ipv", "interface": "ipv0"}])");
  fx.add_pod("default", "pod-b", R"([{"name": "ipv", "interface": "ipv0"}])");
  Proc a = add(fx, node, "pod-a");
  REQUIRE(a.exit_code == 0);
  REQUIRE(add(fx, node, "pod-b").exit_code == 0);

  auto l = link_detail("pod-a", "ipv0");
  CHECK(std::string(l["linkinfo"]["info_kind"].GetString()) == "ipvlan");
  CHECK(std::string(l["linkinfo"]["info_data"]["mode"].GetString()) == "l2");
  CHECK(l["mtu"].GetInt() == 1400);
  auto master = link_detail("", "ipvm0");
  CHECK(std::string(l["address"].GetString()) == master["address"].GetString());  // an ipvlan has its master's MAC
  for (auto& n : link_names("")) CHECK(n.rfind("ipvl", 0) != 0);                   // no temporary name left
  CHECK(sh("ip netns exec pod-a cat /proc/sys/net/ipv4/conf/ipv0/arp_notify").out == "1\n");  // set over rtnetlink
  const std::string ip_b = global_addr("pod-b", "ipv0");
  REQUIRE(ip_b.rfind("198.51.100.", 0) == 0);
  CHECK(pings("pod-a", ip_b, "ipv0"));
  CHECK(pings("pod-a", "198.51.100.200", "ipv0"));
  CHECK(pings("peer", ip_b));

  Proc check = fx.run("CHECK", "ctr-pod-a", "/run/netns/pod-a", "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  for (const char* pod : {"pod-a", "pod-b"}) {
    Proc del = fx.run("DEL", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, fx.config());
    CHECK(del.exit_code == 0);
    CHECK(link_names(pod) == std::set<std::string>{"lo"});
  }
  CHECK(link_names("").count("ipvm0") == 1);
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE("ipvlan l3 and l3s: the mode is set as asked and pods on one master reach each other") {
  for (const char* mode : {"l3", "l3s"}) {
    CAPTURE(mode);
    Node node;
    PodFixture fx(node);
    add_master_with_peer(node, "ipvm0", "peer", "198.51.100.200/24");
    fx.add_nad("default", "ipv", ipvlan_nad(std::string(R"("master": "ipvm0", "mode": ")") + mode + R"(",)", fx));
    fx.add_pod("default", "pod-a", R"([{"name": "ipv", "interface": "ipv0"}])");
    fx.add_pod("default", "pod-b", R"([{"name": "ipv", "interface": "ipv0"}])");
    REQUIRE(add(fx, node, "pod-a").exit_code == 0);
    REQUIRE(add(fx, node, "pod-b").exit_code == 0);
    CHECK(std::string(link_detail("pod-a", "ipv0")["linkinfo"]["info_data"]["mode"].GetString()) == mode);
    CHECK(pings("pod-a", global_addr("pod-b", "ipv0"), "ipv0"));
  }
}

FULL_KERNEL_CASE("ipvlan: the default route's interface is the master without one; linkInContainer takes it from the pod") {
  Node node;
  PodFixture fx(node);
  add_master_with_peer(node, "uplink0", "peer", "198.51.100.200/24");
  REQUIRE(sh("ip route add default dev uplink0").exit_code == 0);
  fx.add_nad("default", "ipv", ipvlan_nad("", fx));
  fx.add_pod("default", "pod-a", R"([{"name": "ipv", "interface": "ipv0"}])");
  REQUIRE(add(fx, node, "pod-a").exit_code == 0);
  auto uplink = link_detail("", "uplink0");
  CHECK(link_detail("pod-a", "ipv0")["link_index"].GetInt() == uplink["ifindex"].GetInt());
  CHECK(pings("pod-a", "198.51.100.200", "ipv0"));

  // linkInContainer: the master is a link of the pod's own namespace.
  std::string pb = node.add_netns("pod-b");
  REQUIRE(sh("ip -n pod-b link add inner0 type veth peer name inner1 && ip -n pod-b link set inner0 up").exit_code == 0);
  fx.add_nad("default", "ipv-in", ipvlan_nad(R"("master": "inner0", "linkInContainer": true,)", fx));
  fx.add_pod("default", "pod-b", R"([{"name": "ipv-in", "interface": "ipv1"}])");
  Proc b = fx.run("ADD", "ctr-pod-b", pb, "default", "pod-b", fx.config());
  INFO(b.out, b.err);
  REQUIRE(b.exit_code == 0);
  CHECK(std::string(link_detail("pod-b", "ipv1")["link"].GetString()) == "inner0");  // its lower link, in the same namespace
  CHECK(fx.run("DEL", "ctr-pod-b", pb, "default", "pod-b", fx.config()).exit_code == 0);
  CHECK(link_names("pod-b").count("ipv1") == 0);
  CHECK(link_names("pod-b").count("inner0") == 1);
}
