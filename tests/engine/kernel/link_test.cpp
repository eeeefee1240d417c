// engine/kernel/link against the real kernel, inside a private node namespace per case: veth
// pairs, bridges, link changes, namespaces moves and link groups. Kernel state is checked
// independently through iproute2 (`ip -j ...`).
#include <doctest/doctest.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/base/netns.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/literals.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE("a name no device can have (a kernel name template, a '/') is found nowhere and deleted as already gone; the device the template made stays") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  REQUIRE(plumb::test::sh("ip link add r%d type bridge").exit_code == 0);  // the kernel names it r0
  for (const std::string name : {"r%d", "a/b", "abcdefghijklmnop"}) {
    CAPTURE(name);
    auto got = link::get(nl, name);
    REQUIRE_OK(got);
    CHECK_FALSE(got->has_value());
    auto removed = link::remove(nl, name);
    REQUIRE_OK(removed);
    CHECK_FALSE(*removed);
  }
  auto r0 = link::get(nl, "r0");
  REQUIRE_OK(r0);
  CHECK(r0->has_value());
}

TEST_CASE("veth pair: the peer is created directly in a pod namespace under its final name") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();

  link::VethSpec spec;
  spec.host_name = "veth1";
  spec.peer_name = "eth0";
  spec.peer_netns_fd = ns.fd();
  spec.mtu_bytes = 1400;
  spec.host_mac = mac("02:00:00:00:01:01");
  spec.peer_mac = mac("02:00:00:00:01:02");
  REQUIRE_OK(link::create_veth(nl, spec));

  // Our view of the host end.
  link::LinkInfo host = must_get(nl, "veth1");
  CHECK(host.kind == "veth");
  CHECK(host.mtu_bytes == 1400);
  REQUIRE(host.mac());
  CHECK(host.mac()->str() == "02:00:00:00:01:01");
  CHECK(host.link_netnsid.has_value());  // the peer lives in another namespace
  auto absent = link::get(nl, "eth0");
  REQUIRE_OK(absent);
  CHECK_FALSE(absent->has_value());  // never existed in the node, not even briefly renamed

  // iproute2's view of both sides.
  auto h = plumb::test::ip_json("link show veth1");
  CHECK(str(h[0], "ifname") == "veth1");
  CHECK(h[0]["mtu"].GetInt() == 1400);
  CHECK(str(h[0], "address") == "02:00:00:00:01:01");
  auto p = plumb::test::ip_json("-n pod1 link show eth0");
  CHECK(str(p[0], "ifname") == "eth0");
  CHECK(p[0]["mtu"].GetInt() == 1400);
  CHECK(str(p[0], "address") == "02:00:00:00:01:02");
  CHECK(p[0]["link_index"].GetInt() == host.index);

  // Our view from inside the pod.
  auto pnl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pnl);
  link::LinkInfo peer = must_get(*pnl, "eth0");
  CHECK(peer.kind == "veth");
  CHECK(peer.link_index == host.index);
  CHECK(host.link_index == peer.index);

  // Removal: by name, then the second time reports "did not exist".
  auto gone = link::remove(nl, "veth1");
  REQUIRE_OK(gone);
  CHECK(*gone);
  auto again = link::remove(nl, "veth1");
  REQUIRE_OK(again);
  CHECK_FALSE(*again);
  auto peer_after = link::get(*pnl, "eth0");
  REQUIRE_OK(peer_after);
  CHECK_FALSE(peer_after->has_value());  // deleting one end deletes the pair
  CHECK(plumb::test::sh("ip -n pod1 link show eth0").exit_code != 0);
}

namespace {

/// VLAN filtering when asked (bridge br1): on, or (kernels built without it, like this one) a
/// clear kernel-feature error.
void check_vlan_filtering(netlink::Socket& nl) {
  link::BridgeSpec vf;
  vf.name = "br1";
  vf.vlan_filtering = true;
  auto vfs = link::create_bridge(nl, vf);
  if (vfs) {
    auto j = plumb::test::ip_json("-d link show br1");
    CHECK(j[0]["linkinfo"]["info_data"]["vlan_filtering"].GetInt() == 1);
  } else {
    CHECK(vfs.error().sys_errno == EOPNOTSUPP);
    CHECK(vfs.error().cni_code == cni_code::kKernelFeature);
    CHECK(vfs.error().msg.find("br1") != std::string::npos);
  }
}

/// Everything at once on the (down) veth end vp0, in one message (renamed to renamed0, MTU, MAC,
/// up, promisc, allmulti, txqlen), then back down with promisc off. Returns its index.
int modify_all_at_once(netlink::Socket& nl) {
  link::LinkInfo vp = must_get(nl, "vp0");
  CHECK_FALSE(vp.up());
  link::LinkChange ch;
  ch.name = "renamed0";
  ch.mtu_bytes = 1300;
  ch.mac = mac("02:00:00:00:02:aa");
  ch.up = true;
  ch.promisc = true;
  ch.allmulti = true;
  ch.txqlen = 42;
  REQUIRE_OK(link::modify(nl, vp.index, ch));
  link::LinkInfo r = must_get(nl, "renamed0");
  CHECK(r.index == vp.index);
  CHECK(r.mtu_bytes == 1300);
  CHECK(r.mac()->str() == "02:00:00:00:02:aa");
  CHECK(r.up());
  CHECK((r.flags & IFF_PROMISC) != 0);
  CHECK((r.flags & IFF_ALLMULTI) != 0);
  CHECK(r.txqlen == 42);
  auto rj = plumb::test::ip_json("link show renamed0");
  CHECK(rj[0]["mtu"].GetInt() == 1300);
  CHECK(str(rj[0], "address") == "02:00:00:00:02:aa");
  CHECK(has_flag(rj[0], "UP"));
  CHECK(has_flag(rj[0], "PROMISC"));
  CHECK(has_flag(rj[0], "ALLMULTI"));
  CHECK(rj[0]["txqlen"].GetInt() == 42);
  auto old = link::get(nl, "vp0");
  REQUIRE_OK(old);
  CHECK_FALSE(old->has_value());

  // And back down / off.
  link::LinkChange off;
  off.up = false;
  off.promisc = false;
  REQUIRE_OK(link::modify(nl, vp.index, off));
  rj = plumb::test::ip_json("link show renamed0");
  CHECK_FALSE(has_flag(rj[0], "UP"));
  CHECK_FALSE(has_flag(rj[0], "PROMISC"));
  CHECK(has_flag(rj[0], "ALLMULTI"));  // untouched
  return vp.index;
}

}  // namespace

TEST_CASE("bridge: create, enslave, hairpin, and modify mtu/mac/up/name/promisc/allmulti/txqlen") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();

  link::BridgeSpec br;
  br.name = "br0";
  br.mtu_bytes = 1450;
  br.mac = mac("02:00:00:00:02:00");
  REQUIRE_OK(link::create_bridge(nl, br));
  link::LinkInfo bri = must_get(nl, "br0");
  CHECK(bri.kind == "bridge");
  auto bj = plumb::test::ip_json("-d link show br0");
  CHECK(str(bj[0]["linkinfo"], "info_kind") == "bridge");
  CHECK(bj[0]["linkinfo"]["info_data"]["vlan_filtering"].GetInt() == 0);  // not asked for
  CHECK(str(bj[0], "address") == "02:00:00:00:02:00");
  CHECK(bj[0]["mtu"].GetInt() == 1450);

  // Duplicate bridge name: EEXIST reported as a conflict.
  auto dup = link::create_bridge(nl, br);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  CHECK(dup.error().cni_code == cni_code::kConflict);

  check_vlan_filtering(nl);

  make_veth(nl, "vh0", "vp0");
  link::LinkInfo vh = must_get(nl, "vh0");

  // Hairpin on a link that is not a bridge port yet.
  auto notport = link::set_bridge_port_hairpin(nl, vh.index, true);
  REQUIRE_FALSE(notport);
  CHECK(notport.error().sys_errno == EOPNOTSUPP);

  link::LinkChange enslave;
  enslave.master_index = bri.index;
  REQUIRE_OK(link::modify(nl, vh.index, enslave));
  CHECK(must_get(nl, "vh0").master_index == bri.index);
  CHECK(str(plumb::test::ip_json("link show vh0")[0], "master") == "br0");

  REQUIRE_OK(link::set_bridge_port_hairpin(nl, vh.index, true));
  auto dj = plumb::test::ip_json("-d link show vh0");
  CHECK(dj[0]["linkinfo"]["info_slave_data"]["hairpin"].GetBool());
  REQUIRE_OK(link::set_bridge_port_hairpin(nl, vh.index, false));
  dj = plumb::test::ip_json("-d link show vh0");
  CHECK_FALSE(dj[0]["linkinfo"]["info_slave_data"]["hairpin"].GetBool());

  link::LinkChange nomaster;
  nomaster.master_index = 0;
  REQUIRE_OK(link::modify(nl, vh.index, nomaster));
  CHECK(must_get(nl, "vh0").master_index == 0);
  CHECK_FALSE(plumb::test::ip_json("link show vh0")[0].HasMember("master"));

  const int vp_index = modify_all_at_once(nl);

  // Renaming onto an existing name.
  link::LinkChange clash;
  clash.name = "vh0";
  auto cl = link::modify(nl, vp_index, clash);
  REQUIRE_FALSE(cl);
  CHECK(cl.error().sys_errno == EEXIST);

  // Removal by index.
  auto rm = link::remove(nl, bri.index);
  REQUIRE_OK(rm);
  CHECK(*rm);
  CHECK(plumb::test::sh("ip link show br0").exit_code != 0);
}

TEST_CASE("link modify moves a link into another namespace") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "mv0", "mv1");
  link::LinkChange ch;
  ch.netns_fd = ns.fd();
  ch.name = "net1";
  REQUIRE_OK(link::modify(nl, must_get(nl, "mv1").index, ch));
  auto gone = link::get(nl, "mv1");
  REQUIRE_OK(gone);
  CHECK_FALSE(gone->has_value());
  CHECK(str(plumb::test::ip_json("-n pod1 link show net1")[0], "ifname") == "net1");
}

TEST_CASE("link groups: peers born in a group, one RTM_DELLINK of the group deletes them and their node ends") {
  plumb::test::Node node;
  std::string pod = node.add_netns("grp");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  auto pnl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pnl);
  for (const char* n : {"0", "1"}) {
    link::VethSpec spec;
    spec.host_name = std::string("gveth") + n;
    spec.peer_name = std::string("eth") + n;
    spec.peer_netns_fd = ns.fd();
    spec.peer_group = link::kPodLinkGroup;
    REQUIRE_OK(link::create_veth(nl, spec));
  }
  link::VethSpec other;  // not in the group
  other.host_name = "oveth";
  other.peer_name = "other";
  other.peer_netns_fd = ns.fd();
  REQUIRE_OK(link::create_veth(nl, other));
  CHECK(must_get(*pnl, "eth0").group == link::kPodLinkGroup);
  CHECK(must_get(*pnl, "other").group == 0);
  CHECK(must_get(nl, "gveth0").group == 0);  // only the peer was asked to be in the group
  auto d = plumb::test::ip_json("-n grp -d link show eth1");
  CHECK(str(d[0], "group") == std::to_string(link::kPodLinkGroup));

  auto removed = link::remove_group(*pnl, link::kPodLinkGroup);
  REQUIRE_OK(removed);
  CHECK(*removed);
  auto left = link::list(*pnl);
  REQUIRE_OK(left);
  std::set<std::string> names;
  for (auto& l : *left) names.insert(l.name);
  CHECK(names == std::set<std::string>{"lo", "other"});
  for (const char* n : {"gveth0", "gveth1"}) {
    auto gone = link::get(nl, n);
    REQUIRE_OK(gone);
    CHECK_FALSE(gone->has_value());  // the node ends went with their peers
  }
  CHECK(must_get(nl, "oveth").index > 0);
  auto again = link::remove_group(*pnl, link::kPodLinkGroup);
  REQUIRE_OK(again);
  CHECK_FALSE(*again);  // nothing in the group: ENODEV
  CHECK_FALSE(link::remove_group(*pnl, 0).has_value());  // group 0 is every link's: refused
}

TEST_CASE("veth pair: the host end can be born a port of a bridge and up, in the creating message, and comes back as the kernel echoed it") {
  plumb::test::Node node;
  std::string pod = node.add_netns("born");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  REQUIRE_OK(link::create_bridge(nl, {"brborn", 0, std::nullopt, false}));
  const link::LinkInfo br = must_get(nl, "brborn");
  link::VethSpec spec;
  spec.host_name = "vborn";
  spec.peer_name = "eth0";
  spec.peer_netns_fd = ns.fd();
  spec.mtu_bytes = 1400;
  spec.host_master_index = br.index;
  spec.host_up = true;
  auto echoed = link::create_veth(nl, spec);
  REQUIRE_OK(echoed);
  const link::LinkInfo host = must_get(nl, "vborn");
  CHECK(host.master_index == br.index);
  CHECK(host.up());
  auto h = plumb::test::ip_json("link show vborn");
  CHECK(str(h[0], "master") == "brborn");

  // NLM_F_ECHO on RTM_NEWLINK is honoured since Linux 6.1 (this machine's and the full-kernel
  // tier's kernels; older ones echo nothing, create_veth returns nullopt and callers read back):
  // the host end, not the peer, as a read-back finds it, its master set after the echo.
  REQUIRE(echoed->has_value());
  const link::LinkInfo& e = **echoed;
  CHECK(e.name == "vborn");
  CHECK(e.index == host.index);
  CHECK(e.kind == "veth");
  REQUIRE(e.mac());
  REQUIRE(host.mac());
  CHECK(e.mac()->str() == host.mac()->str());  // the kernel's random address, as created
  CHECK(e.mtu_bytes == 1400);
  CHECK(e.master_index == br.index);
  CHECK(e.up());
  auto pnl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pnl);
  CHECK(e.link_index == must_get(*pnl, "eth0").index);  // its peer, as bandwidth checks it
}

TEST_CASE("link::modify sets net.ipv4.conf.<if>.arp_notify over rtnetlink, in the socket's namespace") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "s0", "eth0", ns.fd());
  auto pod_nl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pod_nl);
  auto eth0 = link::get(*pod_nl, "eth0");
  REQUIRE_OK(eth0);
  REQUIRE(eth0->has_value());
  auto in_pod = [] { return plumb::test::sh("ip netns exec pod1 cat /proc/sys/net/ipv4/conf/eth0/arp_notify").out; };
  CHECK(in_pod() == "0\n");
  link::LinkChange on;
  on.arp_notify = true;
  REQUIRE_OK(link::modify(*pod_nl, (*eth0)->index, on));
  CHECK(in_pod() == "1\n");
  CHECK(*sysctl::read("net/ipv4/conf/s0/arp_notify") == "0");  // the node's end untouched
  link::LinkChange off;
  off.arp_notify = false;
  REQUIRE_OK(link::modify(*pod_nl, (*eth0)->index, off));
  CHECK(in_pod() == "0\n");
}
