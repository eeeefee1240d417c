// PF-side VF settings without the kernel (engine/kernel/vf.hpp): golden bytes of every PF message
// kind against what iproute2 sends, parsing of a kernel-shaped VF report, restore_of, the JSON form
// undo records hold, and GUIDs. Nothing here needs privileges or touches a network namespace.
//
// The iproute2 arrays below were captured on this machine with
//   unshare -n sh -c 'ip link add pf0 type veth peer name pf0p;
//                     strace -e trace=sendmsg -e write=3 ip link set dev pf0 vf 0 <args>'
// (pf0 had ifindex 3; sequence number and port id zeroed). Two differences are expected and
// applied explicitly to the captured bytes, nothing else: plumb's builders leave NLM_F_ACK to the
// socket (flags 0x0001 instead of 0x0005), and libmnl marks nests with NLA_F_NESTED (0x8000 in the
// nest's type), which iproute2 does not set and the kernel masks off (nla_type()).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <initializer_list>
#include <vector>

#include "engine/kernel/vf.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/literals.hpp"

using namespace plumb;
using namespace plumb::vf;
using plumb::test::Bytes;
using plumb::test::check_bytes;
using Kind = VfSetting::Kind;

using plumb::test::mac;

namespace {

/// iproute2's bytes as plumb's builder must produce them: flags without NLM_F_ACK, and NLA_F_NESTED
/// on the nests whose type's high byte is at `nest_type_high_bytes`.
Bytes as_built(Bytes iproute2, std::initializer_list<size_t> nest_type_high_bytes) {
  REQUIRE(iproute2[6] == 0x05);
  iproute2[6] = 0x01;
  for (size_t off : nest_type_high_bytes) iproute2[off] |= 0x80;
  return iproute2;
}

Bytes hdr(uint8_t len) {
  // nlmsghdr(len, RTM_NEWLINK, REQUEST|ACK, seq 0, pid 0) + ifinfomsg(AF_UNSPEC, index 3)
  return {len, 0x00, 0x00, 0x00, 0x10, 0x00, 0x05, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
          0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

VfSetting setting(Kind k) {
  VfSetting s;
  s.kind = k;
  s.vf = 0;
  return s;
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// PF messages

TEST_CASE("golden: PF message vf 0 mac 02:11:22:33:44:55 equals iproute2's") {
  Bytes ip = cat(hdr(0x50), {0x30, 0x00, 0x16, 0x00, 0x2c, 0x00, 0x01, 0x00, 0x28, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
                             // struct ifla_vf_mac: u32 vf 0, u8 mac[32] = 02:11:22:33:44:55 + 26 zero bytes
                             0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 0, 0});
  auto s = setting(Kind::Mac);
  s.mac = mac("02:11:22:33:44:55");
  check_bytes(build_vf_setting(3, s).bytes(), as_built(ip, {35, 39}));
}

TEST_CASE("golden: PF message vf 0 vlan 100 qos 3 equals iproute2's") {
  Bytes ip = cat(hdr(0x38), {0x18, 0x00, 0x16, 0x00, 0x14, 0x00, 0x01, 0x00, 0x10, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                             0x64, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00});
  auto s = setting(Kind::Vlan);
  s.vlan = 100;
  s.qos = 3;
  check_bytes(build_vf_setting(3, s).bytes(), as_built(ip, {35, 39}));
}

TEST_CASE("golden: PF message vf 0 vlan 100 qos 3 proto 802.1ad (VLAN list) equals iproute2's") {
  Bytes ip = cat(hdr(0x40), {0x20, 0x00, 0x16, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x18, 0x00, 0x0c, 0x00, 0x14, 0x00, 0x01, 0x00,
                             0x00, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x88, 0xa8, 0x00, 0x00});
  auto s = setting(Kind::VlanList);
  s.vlan = 100;
  s.qos = 3;
  s.vlan_proto = ETH_P_8021AD;
  check_bytes(build_vf_setting(3, s).bytes(), as_built(ip, {35, 39, 43}));
}

TEST_CASE("golden: PF messages vf 0 spoofchk on / trust on / state enable equal iproute2's") {
  auto one = [](uint8_t type) {
    return cat(hdr(0x34), {0x14, 0x00, 0x16, 0x00, 0x10, 0x00, 0x01, 0x00, 0x0c, 0x00, type, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
                           0x00, 0x00, 0x00});
  };
  auto spoof = setting(Kind::SpoofChk);
  spoof.on = true;
  check_bytes(build_vf_setting(3, spoof).bytes(), as_built(one(IFLA_VF_SPOOFCHK), {35, 39}));
  auto trust = setting(Kind::Trust);
  trust.on = true;
  check_bytes(build_vf_setting(3, trust).bytes(), as_built(one(IFLA_VF_TRUST), {35, 39}));
  auto state = setting(Kind::LinkState);
  state.link_state = LinkState::Enable;
  check_bytes(build_vf_setting(3, state).bytes(), as_built(one(IFLA_VF_LINK_STATE), {35, 39}));
}

TEST_CASE("golden: PF message vf 0 min_tx_rate 10 max_tx_rate 1000 (Mbit/s) equals iproute2's") {
  Bytes ip = cat(hdr(0x38), {0x18, 0x00, 0x16, 0x00, 0x14, 0x00, 0x01, 0x00, 0x10, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00,
                             0x0a, 0x00, 0x00, 0x00, 0xe8, 0x03, 0x00, 0x00});
  auto s = setting(Kind::Rate);
  s.min_tx_rate = 10;
  s.max_tx_rate = 1000;
  check_bytes(build_vf_setting(3, s).bytes(), as_built(ip, {35, 39}));
}

TEST_CASE("golden: PF messages vf 0 node_guid / port_guid equal iproute2's (two separate messages)") {
  auto one = [](uint8_t type, uint8_t last) {
    return cat(hdr(0x3c), {0x1c, 0x00, 0x16, 0x00, 0x18, 0x00, 0x01, 0x00, 0x14, 0x00, type, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, last, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00});
  };
  auto node = setting(Kind::NodeGuid);
  node.guid = *parse_guid("00:11:22:33:44:55:66:77", "guid");
  check_bytes(build_vf_setting(3, node).bytes(), as_built(one(IFLA_VF_IB_NODE_GUID, 0x77), {35, 39}));
  auto port = setting(Kind::PortGuid);
  port.guid = *parse_guid("00:11:22:33:44:55:66:78", "guid");
  check_bytes(build_vf_setting(3, port).bytes(), as_built(one(IFLA_VF_IB_PORT_GUID, 0x78), {35, 39}));
}

TEST_CASE("golden: the VF settings query is RTM_GETLINK by index with IFLA_EXT_MASK = RTEXT_FILTER_VF|SKIP_STATS") {
  const Bytes want = {
      // nlmsghdr: len 40, RTM_GETLINK (18), REQUEST
      0x28, 0x00, 0x00, 0x00, 0x12, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // ifinfomsg: AF_UNSPEC, index 3
      0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // IFLA_EXT_MASK (29) len 8, RTEXT_FILTER_VF (1) | RTEXT_FILTER_SKIP_STATS (8) = 9 (iproute2 sends the same mask)
      0x08, 0x00, 0x1d, 0x00, 0x09, 0x00, 0x00, 0x00};
  check_bytes(build_get_vfs(3).bytes(), want);
}

// ---------------------------------------------------------------------------------------------
// Reading a VF report

namespace {

/// A kernel-shaped RTM_NEWLINK with IFLA_VFINFO_LIST for VFs 0 and 1 (rtnl_fill_vfinfo's layout).
netlink::Message vf_report() {
  netlink::Message m(RTM_NEWLINK, 0);
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_index = 3;
  m.put_str(IFLA_IFNAME, "pf0");
  {
    netlink::Message::Nest list(m, IFLA_VFINFO_LIST);
    for (uint32_t vf : {0u, 1u}) {
      netlink::Message::Nest info(m, IFLA_VF_INFO);
      ifla_vf_mac vm{};
      vm.vf = vf;
      uint8_t mb[6] = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(0x10 + vf)};
      std::memcpy(vm.mac, mb, 6);
      m.put(IFLA_VF_MAC, &vm, sizeof vm);
      ifla_vf_vlan vv{vf, 0, 0};
      m.put(IFLA_VF_VLAN, &vv, sizeof vv);
      {
        netlink::Message::Nest vl(m, IFLA_VF_VLAN_LIST);
        ifla_vf_vlan_info vi{};
        vi.vf = vf;
        vi.vlan = vf == 1 ? 200 : 0;
        vi.qos = vf == 1 ? 5 : 0;
        vi.vlan_proto = htons(vf == 1 ? ETH_P_8021AD : ETH_P_8021Q);
        m.put(IFLA_VF_VLAN_INFO, &vi, sizeof vi);
      }
      ifla_vf_rate vr{vf, 5, 500};
      m.put(IFLA_VF_RATE, &vr, sizeof vr);
      ifla_vf_spoofchk vs{vf, vf == 1 ? UINT32_MAX : 1u};  // VF 1: the driver cannot tell (-1)
      m.put(IFLA_VF_SPOOFCHK, &vs, sizeof vs);
      ifla_vf_link_state vls{vf, 2};
      m.put(IFLA_VF_LINK_STATE, &vls, sizeof vls);
      ifla_vf_trust vt{vf, 0};
      m.put(IFLA_VF_TRUST, &vt, sizeof vt);
      if (vf == 1) {
        ifla_vf_guid g{};
        g.vf = vf;
        g.guid = 0x1122334455667788ull;
        m.put(IFLA_VF_IB_PORT_GUID, &g, sizeof g);
      }
    }
  }
  return m;
}

}  // namespace

TEST_CASE("parse: a VF report gives each VF's MAC, VLAN (list first, 802.1ad), rate, spoofchk, link state, trust, GUID") {
  auto m = vf_report();
  auto v0 = parse_vf_state(m.header(), 0, "pf0");
  REQUIRE(v0);
  CHECK(v0->mac == mac("02:00:00:00:00:10"));
  CHECK(v0->vlan == 0);
  CHECK(v0->vlan_proto == ETH_P_8021Q);
  CHECK(v0->spoofchk == std::optional<bool>(true));
  CHECK(v0->trust == std::optional<bool>(false));
  CHECK(v0->link_state == std::optional<LinkState>(LinkState::Disable));
  CHECK(v0->min_tx_rate == 5);
  CHECK(v0->max_tx_rate == 500);
  CHECK_FALSE(v0->port_guid.has_value());
  auto v1 = parse_vf_state(m.header(), 1, "pf0");
  REQUIRE(v1);
  CHECK(v1->mac == mac("02:00:00:00:00:11"));
  CHECK(v1->vlan == 200);
  CHECK(v1->qos == 5);
  CHECK(v1->vlan_proto == ETH_P_8021AD);
  CHECK_FALSE(v1->spoofchk.has_value());  // (u32)-1: unknown, never "restored"
  CHECK(v1->port_guid == std::optional<uint64_t>(0x1122334455667788ull));
}

TEST_CASE("parse: a link without VF list, a missing VF and a short IFLA_VF_MAC are clear errors") {
  auto m = vf_report();
  auto v7 = parse_vf_state(m.header(), 7, "pf0");
  REQUIRE_FALSE(v7);
  CHECK(v7.error().cni_code == cni_code::kKernelFeature);
  CHECK(v7.error().msg.find("no VF 7") != std::string::npos);

  netlink::Message plain(RTM_NEWLINK, 0);
  plain.put_header<ifinfomsg>()->ifi_index = 4;
  plain.put_str(IFLA_IFNAME, "veth0");
  auto none = parse_vf_state(plain.header(), 0, "veth0");
  REQUIRE_FALSE(none);
  CHECK(none.error().cni_code == cni_code::kKernelFeature);
  CHECK(none.error().msg.find("reports no VFs") != std::string::npos);

  netlink::Message shortmac(RTM_NEWLINK, 0);
  shortmac.put_header<ifinfomsg>()->ifi_index = 3;
  {
    netlink::Message::Nest list(shortmac, IFLA_VFINFO_LIST);
    netlink::Message::Nest info(shortmac, IFLA_VF_INFO);
    uint8_t six[8] = {0, 0, 0, 0, 2, 0, 0, 0};
    shortmac.put(IFLA_VF_MAC, six, sizeof six);
  }
  auto bad = parse_vf_state(shortmac.header(), 0, "pf0");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().sys_errno != 0);
}

TEST_CASE("restore_of: the saved value of the same kind; unknown values are not restored; 802.1ad goes through the list") {
  VfState saved;
  saved.mac = mac("02:00:00:00:00:10");
  saved.vlan = 200;
  saved.qos = 5;
  saved.vlan_proto = ETH_P_8021AD;
  saved.trust = false;
  auto applied = setting(Kind::Vlan);
  applied.vlan = 100;
  auto r = restore_of(applied, saved);
  REQUIRE(r);
  CHECK(r->kind == Kind::VlanList);
  CHECK(r->vlan == 200);
  CHECK(r->qos == 5);
  CHECK(r->vlan_proto == ETH_P_8021AD);
  auto spoof = setting(Kind::SpoofChk);
  CHECK_FALSE(restore_of(spoof, saved).has_value());
  auto m = setting(Kind::Mac);
  m.mac = mac("02:aa:aa:aa:aa:aa");
  CHECK(restore_of(m, saved)->mac == mac("02:00:00:00:00:10"));
}

TEST_CASE("VfSetting: JSON round trip of every kind (what undo records hold)") {
  for (Kind k : {Kind::Mac, Kind::Vlan, Kind::VlanList, Kind::Rate, Kind::SpoofChk, Kind::Trust, Kind::LinkState, Kind::NodeGuid,
                 Kind::PortGuid}) {
    VfSetting s = setting(k);
    s.vf = 5;
    s.mac = mac("02:01:02:03:04:05");
    s.vlan = 4094;
    s.qos = 7;
    s.vlan_proto = ETH_P_8021AD;
    s.min_tx_rate = 1;
    s.max_tx_rate = 2;
    s.on = true;
    s.link_state = LinkState::Disable;
    s.guid = 0xfedcba9876543210ull;
    json::Document d;
    auto v = s.to_json(d.GetAllocator());
    auto back = VfSetting::from_json(v);
    REQUIRE(back);
    CHECK(build_vf_setting(3, *back).bytes() == build_vf_setting(3, s).bytes());
    CHECK(back->describe() == s.describe());
  }
}

TEST_CASE("GUIDs: 8 bytes, not all zero; IPoIB addresses are 20 bytes with the port GUID last") {
  CHECK(*parse_guid("00:11:22:33:44:55:66:77", "g") == 0x0011223344556677ull);
  CHECK(format_guid(0x0011223344556677ull) == "00:11:22:33:44:55:66:77");
  for (const char* bad : {"00:11:22:33:44:55:66", "00:11:22:33:44:55:66:77:88", "00-11-22-33-44-55-66-77", "zz:11:22:33:44:55:66:77",
                          "00:00:00:00:00:00:00:00"}) {
    auto g = parse_guid(bad, "runtimeConfig.infinibandGUID");
    INFO(bad);
    REQUIRE_FALSE(g);
    CHECK(g.error().cni_code == cni_code::kInvalidConfig);
    CHECK(g.error().msg.find(bad) != std::string::npos);
  }
  std::vector<uint8_t> ipoib = {0x80, 0x00, 0x00, 0x48, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
  CHECK(*guid_from_ipoib_hwaddr(ipoib, "ib0") == 0x0011223344556677ull);
  auto eth = guid_from_ipoib_hwaddr({2, 0, 0, 0, 0, 1}, "eth1");
  REQUIRE_FALSE(eth);
  CHECK(eth.error().msg.find("6-byte") != std::string::npos);
}

TEST_CASE("VfSetting: a saved all-zero GUID decodes (never assigned), a malformed one is a kDecode error") {
  VfSetting s = setting(Kind::PortGuid);
  s.guid = 0;
  json::Document d;
  auto back = VfSetting::from_json(s.to_json(d.GetAllocator()));
  REQUIRE(back);
  CHECK(back->guid == 0);
  auto bad = json::parse(R"({"kind":"node_guid","vf":0,"guid":"00:11:22"})", "t");
  REQUIRE(bad);
  auto r = VfSetting::from_json(*bad);
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kDecode);
  CHECK(r.error().msg.find("bad guid") != std::string::npos);
}
