// The vlan driver: configuration errors and, on this machine's kernel (no 802.1Q), the clear CNI
// error (host); pods on two VLANs of one trunk reaching their VLAN — and only it — on a "switch"
// namespace, MTU, linkInContainer, CHECK and DEL on Debian's kernel (full-kernel tier).
#include <doctest/doctest.h>

#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb::test;

namespace {

std::string vlan_nad(const std::string& keys, const PodFixture& fx, const std::string& subnet) {
  return R"({"cniVersion": "1.0.0", "type": "vlan", )" + keys + R"(
   "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(",
            "ranges": [[{"subnet": ")" + subnet + R"(", "rangeStart": ")" + subnet.substr(0, subnet.rfind('.')) + R"(.10"}]]}})";
}

/// A trunk: veth "trunk0" in the node, its peer in namespace "switch" with, when the kernel has
/// 802.1Q, VLAN 100 (198.51.100.200) and VLAN 200 (192.0.2.200).
void add_trunk(Node& node, bool vlans) {
  node.add_netns("switch");
  REQUIRE(sh("ip link add trunk0 type veth peer name trunk0p netns switch && ip link set trunk0 up && "
             "ip -n switch link set trunk0p up").exit_code == 0);
  if (!vlans) return;
  REQUIRE(sh("ip -n switch link add link trunk0p name t100 type vlan id 100 && ip -n switch link set t100 up && "
             "ip -n switch addr add 198.51.100.200/24 dev t100 && "
             "ip -n switch link add link trunk0p name t200 type vlan id 200 && ip -n switch link set t200 up && "
             "ip -n switch addr add 192.0.2.200/24 dev t200").exit_code == 0);
}

Proc add(const PodFixture& fx, Node& node, const std::string& pod) {
  Proc p = fx.run("ADD", "ctr-" + pod, node.add_netns(pod), "default", pod, fx.config());
  INFO(pod, ": ", p.out, p.err);
  return p;
}


}  // namespace

TEST_CASE("vlan config: master and ipam are required, vlanId and mtu are checked, each error names the key") {
  Node node;
  PodFixture fx(node);
  add_trunk(node, false);
  auto expect = [&](const std::string& nad, const std::string& needle) {
    fx.add_nad("default", "vl", nad);
    fx.add_pod("default", "p", R"([{"name": "vl"}])");
    Proc p = fx.run("ADD", "ctr-p", node.add_netns("p"), "default", "p", fx.config());
    INFO(p.out, p.err);
    CHECK(p.exit_code != 0);
    CHECK(p.out.find(needle) != std::string::npos);
    CHECK(no_records(fx));
    CHECK(link_names("p") == std::set<std::string>{"lo"});
    node.del_netns("p");
  };
  expect(vlan_nad(R"("vlanId": 100,)", fx, "198.51.100.0/24"), "vl.master is required");
  expect(vlan_nad(R"("master": "trunk0", "vlanId": 4095,)", fx, "198.51.100.0/24"), "vl.vlanId 4095 is not a valid VLAN ID");
  expect(R"({"cniVersion": "1.0.0", "type": "vlan", "master": "trunk0", "vlanId": 100})", "needs an \\\"ipam\\\"");
  expect(vlan_nad(R"("master": "trunk0", "vlanId": 100, "mtu": 9000,)", fx, "198.51.100.0/24"), "vl.mtu 9000 is above the MTU 1500 of master trunk0");
  expect(vlan_nad(R"("master": "nosuch0", "vlanId": 100,)", fx, "198.51.100.0/24"), R"(vl.master \"nosuch0\" not found)");
}

TEST_CASE("vlan on this machine's kernel: without 802.1Q support the ADD fails naming the missing feature, leaving nothing") {
  Node node;
  PodFixture fx(node);
  add_trunk(node, false);
  fx.add_nad("default", "vl", vlan_nad(R"("master": "trunk0", "vlanId": 100,)", fx, "198.51.100.0/24"));
  fx.add_pod("default", "pod-a", R"([{"name": "vl", "interface": "vl0"}])");
  check_feature_or_error(add(fx, node, "pod-a"), "link prbm0 type vlan id 7", "no 802.1Q VLAN support (CONFIG_VLAN_8021Q", "pod-a", "vl0", fx);
}

FULL_KERNEL_CASE("vlan: pods on VLANs 100 and 200 of one trunk reach their VLAN on the switch, a pod on VLAN 300 does not; CHECK; DEL") {
  Node node;
  PodFixture fx(node);
  add_trunk(node, true);
  fx.add_nad("default", "v100", vlan_nad(R"("master": "trunk0", "vlanId": 100, "mtu": 1400,)", fx, "198.51.100.0/24"));
  fx.add_nad("default", "v200", vlan_nad(R"("master": "trunk0", "vlanId": 200,)", fx, "192.0.2.0/24"));
  fx.add_pod("default", "pod-a", R"([{"name": "v100", "interface": "vl0"}])");
  fx.add_nad("default", "v300", vlan_nad(R"("master": "trunk0", "vlanId": 300,)", fx, "198.51.100.0/24"));
  fx.add_pod("default", "pod-b", R"([{"name": "v200", "interface": "vl0"}])");
  fx.add_pod("default", "pod-c", R"([{"name": "v300", "interface": "vl0"}])");
  Proc a = add(fx, node, "pod-a");
  REQUIRE(a.exit_code == 0);
  REQUIRE(add(fx, node, "pod-b").exit_code == 0);
  REQUIRE(add(fx, node, "pod-c").exit_code == 0);

  auto l = link_detail("pod-a", "vl0");
  CHECK(std::string(l["linkinfo"]["info_kind"].GetString()) == "vlan");
  CHECK(l["linkinfo"]["info_data"]["id"].GetInt() == 100);
  CHECK(l["mtu"].GetInt() == 1400);
  CHECK(l["link_index"].GetInt() == link_detail("", "trunk0")["ifindex"].GetInt());
  for (auto& n : link_names("")) CHECK(n.rfind("vlan", 0) != 0);  // no temporary name left
  CHECK(pings("pod-a", "198.51.100.200", "vl0"));                  // VLAN 100 on the switch
  CHECK(pings("pod-b", "192.0.2.200", "vl0"));                     // VLAN 200
  CHECK_FALSE(pings("pod-c", "198.51.100.200", "vl0", 1));         // same subnet, VLAN 300: another segment

  Proc check = fx.run("CHECK", "ctr-pod-a", "/run/netns/pod-a", "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) {
    CHECK(fx.run("DEL", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, fx.config()).exit_code == 0);
    CHECK(link_names(pod) == std::set<std::string>{"lo"});
  }
  CHECK(link_names("").count("trunk0") == 1);
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE("vlan: linkInContainer creates the VLAN on a master of the pod's own namespace") {
  Node node;
  PodFixture fx(node);
  std::string pb = node.add_netns("pod-b");
  REQUIRE(sh("ip -n pod-b link add inner0 type veth peer name inner1 && ip -n pod-b link set inner0 up").exit_code == 0);
  fx.add_nad("default", "vl-in", vlan_nad(R"("master": "inner0", "vlanId": 42, "linkInContainer": true,)", fx, "198.51.100.0/24"));
  fx.add_pod("default", "pod-b", R"([{"name": "vl-in", "interface": "vl1"}])");
  Proc b = fx.run("ADD", "ctr-pod-b", pb, "default", "pod-b", fx.config());
  INFO(b.out, b.err);
  REQUIRE(b.exit_code == 0);
  auto l = link_detail("pod-b", "vl1");
  CHECK(l["linkinfo"]["info_data"]["id"].GetInt() == 42);
  CHECK(std::string(l["link"].GetString()) == "inner0");  // its lower link, in the same namespace
  CHECK(fx.run("DEL", "ctr-pod-b", pb, "default", "pod-b", fx.config()).exit_code == 0);
  CHECK(link_names("pod-b").count("vl1") == 0);
}
