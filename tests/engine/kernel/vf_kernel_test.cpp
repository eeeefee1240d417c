// The kernel's own validation of plumb's PF-side VF messages (engine/kernel/vf.hpp) on this machine,
// which has no SR-IOV, each case in a fresh private node namespace:
//  - [kernel] every PF message kind sent to a veth standing in for the PF: do_setvfinfo parses it
//    and answers EOPNOTSUPP (veth has no ndo_set_vf_*), which NetlinkPfOps turns into a clear
//    kKernelFeature error; malformed messages get ERANGE (short IFLA_VF_MAC) and EINVAL (absurd
//    VF index), proving the validation really looks at our bytes;
//  - [kernel] RTM_GETLINK with RTEXT_FILTER_VF on the veth "PF": no VF list, a clear error.
#include <doctest/doctest.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>

#include "engine/kernel/link.hpp"
#include "engine/kernel/vf.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::vf;
using plumb::test::Node;
using Kind = VfSetting::Kind;

namespace {

int veth_pf(netlink::Socket& nl) {
  auto r = test::sh("ip link add pf0 type veth peer name pf0p");
  REQUIRE(r.exit_code == 0);
  auto l = link::get(nl, "pf0");
  REQUIRE(l);
  REQUIRE(l->has_value());
  return (*l)->index;
}

std::vector<VfSetting> every_kind() {
  std::vector<VfSetting> out;
  for (Kind k : {Kind::Mac, Kind::Vlan, Kind::VlanList, Kind::Rate, Kind::SpoofChk, Kind::Trust, Kind::LinkState, Kind::NodeGuid,
                 Kind::PortGuid}) {
    VfSetting s;
    s.kind = k;
    s.vf = 0;
    s.mac = *Mac::parse("02:11:22:33:44:55");
    s.vlan = 100;
    s.qos = 3;
    s.vlan_proto = 0x88a8;
    s.min_tx_rate = 10;
    s.max_tx_rate = 1000;
    s.on = true;
    s.link_state = LinkState::Enable;
    s.guid = 0x0011223344556677ull;
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("[kernel] every PF message kind sent to a veth PF: the kernel parses it and answers EOPNOTSUPP") {
  Node node;
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  int pf = veth_pf(*nl);
  for (auto& s : every_kind()) {
    auto m = build_vf_setting(pf, s);
    auto st = nl->request(m, s.describe());
    INFO(s.describe());
    REQUIRE_FALSE(st);
    CHECK(st.error().sys_errno == EOPNOTSUPP);
  }
}

TEST_CASE("[kernel] NetlinkPfOps on a veth PF: a clear kKernelFeature error naming the PF and the setting") {
  Node node;
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  veth_pf(*nl);
  NetlinkPfOps ops(*nl);
  for (auto& s : every_kind()) {
    auto st = ops.set("pf0", s);
    INFO(s.describe());
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kKernelFeature);
    CHECK(st.error().msg.find("PF pf0") != std::string::npos);
    CHECK(st.error().msg.find(s.describe()) != std::string::npos);
  }
  auto missing = ops.set("nopf", every_kind().front());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().cni_code == cni_code::kNotFound);
}

TEST_CASE("[kernel] malformed PF messages: short IFLA_VF_MAC gets ERANGE, VF index 0xffffffff gets EINVAL") {
  Node node;
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  int pf = veth_pf(*nl);
  {
    netlink::Message m(RTM_NEWLINK, 0);
    m.put_header<ifinfomsg>()->ifi_index = pf;
    {
      netlink::Message::Nest list(m, IFLA_VFINFO_LIST);
      netlink::Message::Nest info(m, IFLA_VF_INFO);
      uint8_t short_mac[10] = {0, 0, 0, 0, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55};  // 10 of struct ifla_vf_mac's 36 bytes
      m.put(IFLA_VF_MAC, short_mac, sizeof short_mac);
    }
    auto st = nl->request(m, "short mac");
    REQUIRE_FALSE(st);
    CHECK(st.error().sys_errno == ERANGE);
  }
  for (Kind k : {Kind::Mac, Kind::Vlan, Kind::Rate, Kind::NodeGuid}) {
    VfSetting s = every_kind().front();
    s.kind = k;
    s.vf = 0xffffffffu;
    auto m = build_vf_setting(pf, s);
    auto st = nl->request(m, "absurd vf");
    INFO(s.describe());
    REQUIRE_FALSE(st);
    CHECK(st.error().sys_errno == EINVAL);
  }
}

TEST_CASE("[kernel] reading VF settings from a veth PF (RTM_GETLINK, RTEXT_FILTER_VF): no VF list, a clear error") {
  Node node;
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  veth_pf(*nl);
  NetlinkPfOps ops(*nl);
  auto v = ops.get_vf("pf0", 0);
  REQUIRE_FALSE(v);
  CHECK(v.error().cni_code == cni_code::kKernelFeature);
  CHECK(v.error().msg.find("PF pf0 reports no VFs") != std::string::npos);
}
