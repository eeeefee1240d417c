// SR-IOV, InfiniBand, RDMA and vDPA without the kernel: golden bytes of every PF message kind
// against what iproute2 sends, RDMA netlink SET/SYS_SET and vdpa DEV_GET against the uapi layouts,
// parsing of a kernel-shaped VF report, GUIDs, device-info files (spec 1.1.0) and the VF lookup in
// a fake sysfs tree. Nothing here needs privileges or touches a network namespace.
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
#include <linux/genetlink.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <vector>

#include "drivers/sriov_pf.hpp"
#include "drivers/sriov_vf.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/rdma.hpp"
#include "engine/kernel/vdpa.hpp"
#include "tests/support/sriov_fakes.hpp"

using namespace plumb;
using namespace plumb::drivers::sriov;
using Bytes = std::vector<uint8_t>;
using Kind = VfSetting::Kind;

namespace {

static_assert(std::endian::native == std::endian::little, "golden arrays are written for little-endian hosts");

void check_bytes(const Bytes& got, const Bytes& want) {
  size_t first = 0;
  while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
  INFO("sizes got ", got.size(), " want ", want.size(), "; first difference at offset ", first);
  CHECK(got == want);
}

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

Mac mac(const char* s) {
  auto m = Mac::parse(s);
  REQUIRE(m);
  return *m;
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

// ---------------------------------------------------------------------------------------------
// RDMA netlink and vdpa generic netlink

TEST_CASE("golden: RDMA_NLDEV_CMD_SET moving device 2 into the netns open at fd 7 (rdma dev set <dev> netns <ns>)") {
  const Bytes want = {
      // nlmsghdr: len 32, type RDMA_NL_GET_TYPE(RDMA_NL_NLDEV=5, SET=2) = 0x1402, REQUEST, seq 0, pid 0
      0x20, 0x00, 0x00, 0x00, 0x02, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // RDMA_NLDEV_ATTR_DEV_INDEX (1) u32 2
      0x08, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00,
      // RDMA_NLDEV_NET_NS_FD (68) u32 7
      0x08, 0x00, 0x44, 0x00, 0x07, 0x00, 0x00, 0x00};
  check_bytes(rdma::build_set_netns(2, 7).bytes(), want);
}

TEST_CASE("golden: RDMA_NLDEV_CMD_SYS_SET netns mode exclusive / shared, SYS_GET and the device dump") {
  const Bytes excl = {
      // nlmsghdr: len 24, type 0x1407 (SYS_SET = 7), REQUEST
      0x18, 0x00, 0x00, 0x00, 0x07, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // RDMA_NLDEV_SYS_ATTR_NETNS_MODE (66) u8 0 (exclusive), padded to 4
      0x05, 0x00, 0x42, 0x00, 0x00, 0x00, 0x00, 0x00};
  check_bytes(rdma::build_sys_set(rdma::NetnsMode::Exclusive).bytes(), excl);
  Bytes shared = excl;
  shared[20] = 0x01;
  check_bytes(rdma::build_sys_set(rdma::NetnsMode::Shared).bytes(), shared);
  check_bytes(rdma::build_sys_get().bytes(), Bytes{0x10, 0, 0, 0, 0x06, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0});
  // CMD_GET (1) with REQUEST|DUMP (0x0301)
  check_bytes(rdma::build_dev_dump().bytes(), Bytes{0x10, 0, 0, 0, 0x01, 0x14, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("golden: vdpa VDPA_CMD_DEV_GET dump and the nlctrl CTRL_CMD_GETFAMILY \"vdpa\" request") {
  const Bytes dev_get = {
      // nlmsghdr: len 20, type = the family id (0x1f here), REQUEST|DUMP
      0x14, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0,
      // genlmsghdr: cmd VDPA_CMD_DEV_GET (5), version VDPA_GENL_VERSION (1), reserved 0
      0x05, 0x01, 0x00, 0x00};
  check_bytes(vdpa::build_dev_get_dump(0x1f).bytes(), dev_get);
  const Bytes family = {
      // nlmsghdr: len 32, GENL_ID_CTRL (0x10), REQUEST
      0x20, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // genlmsghdr: CTRL_CMD_GETFAMILY (3), version 1
      0x03, 0x01, 0x00, 0x00,
      // CTRL_ATTR_FAMILY_NAME (2) len 9 "vdpa\0" + 3 pad
      0x09, 0x00, 0x02, 0x00, 'v', 'd', 'p', 'a', 0x00, 0x00, 0x00, 0x00};
  check_bytes(vdpa::build_get_family("vdpa").bytes(), family);
}

TEST_CASE("parse: a VDPA_CMD_DEV_GET reply names the device and its PCI management device") {
  netlink::Message m(0x1f, 0);
  auto* g = m.put_header<genlmsghdr>();
  g->cmd = 5;
  m.put_str(1, "pci");           // VDPA_ATTR_MGMTDEV_BUS_NAME
  m.put_str(2, "0000:65:00.2");  // VDPA_ATTR_MGMTDEV_DEV_NAME
  m.put_str(4, "vdpa0");         // VDPA_ATTR_DEV_NAME
  auto d = vdpa::parse_device(m.header());
  REQUIRE(d);
  CHECK(d->name == "vdpa0");
  CHECK(d->mgmt_bus == "pci");
  CHECK(d->mgmt_dev == "0000:65:00.2");
  std::vector<vdpa::Device> all = {{"vdpa9", "", "vdpasim_net"}, *d};
  CHECK(vdpa::find_by_pci(all, "0000:65:00.2")->name == "vdpa0");
  CHECK_FALSE(vdpa::find_by_pci(all, "0000:65:00.3").has_value());
}

// ---------------------------------------------------------------------------------------------
// device-info (spec 1.1.0)

namespace {

struct TmpDir {
  std::string path;
  TmpDir() {
    char t[] = "/tmp/plumb-devinfo-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("device-info: pci and vdpa documents have the spec's keys, in order, empty ones omitted") {
  devinfo::PciInfo p;
  p.pci_address = "0000:03:00.2";
  p.pf_pci_address = "0000:03:00.0";
  p.rdma_device = "mlx5_2";
  CHECK(json::dump(devinfo::make_pci(p)) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:03:00.0"}})");
  devinfo::VdpaInfo v;
  v.parent_device = "vdpa0";
  v.driver = "vhost";
  v.path = "/dev/vhost-vdpa-0";
  v.pci_address = "0000:65:00.2";
  v.pf_pci_address = "0000:65:00.0";
  CHECK(json::dump(devinfo::make_vdpa(v)) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})");
}

TEST_CASE("device-info: file names as the spec gives them (resource name '/' becomes '-')") {
  CHECK(devinfo::dp_file("/var/run/k8s.cni.cncf.io/devinfo", "intel.com/sriov_net", "0000:03:00.2") ==
        "/var/run/k8s.cni.cncf.io/devinfo/dp/intel.com-sriov_net-0000:03:00.2-device.json");
  CHECK(devinfo::cni_file("/b", "ctr1", "net1") == "/b/cni/ctr1-net1-device.json");
}

TEST_CASE("device-info: validation names the problem") {
  for (const char* bad : {R"([])", R"({"version":"1.1.0","pci":{}})", R"({"type":"usb","version":"1.1.0"})",
                          R"({"type":"pci","version":"1.1.0"})", R"({"type":"pci","version":"1.1.0","pci":{"vhost-net":"/dev/vhost-net"}})"}) {
    auto d = json::parse(bad, "t");
    REQUIRE(d);
    INFO(bad);
    CHECK_FALSE(devinfo::validate(*d, "x"));
  }
}

TEST_CASE("device-info: the file is written once with mode 0444; completion adds only missing keys; removal is idempotent") {
  TmpDir t;
  std::string f = t.path + "/cni/c-net1-device.json";
  devinfo::PciInfo dp;
  dp.pci_address = "0000:03:00.2";
  dp.vhost_net = "/dev/vhost-net";
  REQUIRE(devinfo::write_once(f, devinfo::make_pci(dp)));
  struct stat st {};
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  auto again = devinfo::write_once(f, devinfo::make_pci(dp));
  REQUIRE_FALSE(again);
  CHECK(again.error().cni_code == cni_code::kConflict);

  devinfo::PciInfo found;
  found.pci_address = "0000:99:99.9";  // the device plugin's value stands
  found.pf_pci_address = "0000:03:00.0";
  found.rdma_device = "mlx5_2";
  REQUIRE(devinfo::complete(f, devinfo::make_pci(found)));
  CHECK(slurp(f) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","rdma-device":"mlx5_2","pf-pci-address":"0000:03:00.0"}})");
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);

  std::string g = t.path + "/cni/c-net2-device.json";  // no device plugin file: the driver's findings
  REQUIRE(devinfo::complete(g, devinfo::make_pci(found)));
  CHECK(slurp(g) == json::dump(devinfo::make_pci(found)));

  REQUIRE(devinfo::remove(f));
  CHECK_FALSE(std::filesystem::exists(f));
  CHECK(devinfo::remove(f));
  auto undo = devinfo::undo_remove(g);
  CHECK(devinfo::run_undo_remove(undo));
  CHECK_FALSE(std::filesystem::exists(g));
}

TEST_CASE("device-info: planning needs resourceName and a deviceID, and hands the path to plugins declaring CNIDeviceInfoFile") {
  auto plugins = json::parse(R"([{"type":"sriov","deviceID":"0000:03:00.2","capabilities":{"CNIDeviceInfoFile":true}},
                                 {"type":"tuning"}])",
                             "t");
  REQUIRE(plugins);
  devinfo::Plan none;
  REQUIRE(devinfo::plan(*plugins, none, "/b", "ctr", "net1"));
  CHECK(none.file.empty());  // no resourceName
  devinfo::Plan p;
  p.resource_name = "intel.com/sriov";
  REQUIRE(devinfo::plan(*plugins, p, "/b", "ctr", "net1"));
  CHECK(p.device_id == "0000:03:00.2");
  CHECK(p.file == "/b/cni/ctr-net1-device.json");
  CHECK(std::string((*plugins)[0]["runtimeConfig"]["CNIDeviceInfoFile"].GetString()) == p.file);
  CHECK_FALSE((*plugins)[1].HasMember("runtimeConfig"));
  // runtimeConfig.deviceID (the runtime's) wins over the config's deviceID.
  auto rc = json::parse(R"([{"type":"sriov","deviceID":"0000:03:00.2","runtimeConfig":{"deviceID":"0000:03:00.3"}}])", "t");
  CHECK(devinfo::chain_device_id(*rc) == "0000:03:00.3");
  auto noid = json::parse(R"([{"type":"sriov"}])", "t");
  devinfo::Plan q;
  q.resource_name = "intel.com/sriov";
  REQUIRE(devinfo::plan(*noid, q, "/b", "ctr", "net1"));
  CHECK(q.file.empty());
}

// ---------------------------------------------------------------------------------------------
// VF lookup in a (fake) sysfs tree

TEST_CASE("sysfs: VF index, PF, driver, netdev and RDMA device from a fake tree; clear errors otherwise") {
  TmpDir t;
  test::FakeSysfs fs(t.path + "/sys");
  fs.add_pf("0000:03:00.0", "pf0", 4);
  fs.add_vf("0000:03:00.0", 0, "0000:03:00.2", "iavf", "vf0");
  fs.add_vf("0000:03:00.0", 3, "0000:03:00.5", "mlx5_core", "ib3", "mlx5_5");
  fs.add_vf("0000:03:00.0", 1, "0000:03:00.3", "vfio-pci");
  auto v = lookup_device(fs.root(), "0000:03:00.5", true, "net.deviceID");
  REQUIRE(v);
  CHECK(v->vf_index == 3);
  CHECK(v->pf_pci == "0000:03:00.0");
  CHECK(v->pf_netdev == "pf0");
  CHECK(v->driver == "mlx5_core");
  CHECK(v->netdev == "ib3");
  CHECK(v->rdma_device == "mlx5_5");
  CHECK_FALSE(v->userspace());
  auto u = lookup_device(fs.root(), "0000:03:00.3", true, "net.deviceID");
  REQUIRE(u);
  CHECK(u->userspace());
  CHECK(u->netdev.empty());

  auto missing = lookup_device(fs.root(), "0000:03:00.7", true, "net.deviceID");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  auto pf = lookup_device(fs.root(), "0000:03:00.0", true, "net.deviceID");
  REQUIRE_FALSE(pf);
  CHECK(pf.error().msg.find("not an SR-IOV VF") != std::string::npos);
  auto bad = lookup_device(fs.root(), "03:00.2", true, "net.deviceID");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().msg.find("\"03:00.2\" is not a PCI address") != std::string::npos);

  // A VF index beyond sriov_numvfs is refused.
  fs.add_vf("0000:03:00.0", 5, "0000:03:00.7", "iavf", "vf5");
  auto beyond = lookup_device(fs.root(), "0000:03:00.7", true, "net.deviceID");
  REQUIRE_FALSE(beyond);
  CHECK(beyond.error().msg.find("sriov_numvfs") != std::string::npos);
}

TEST_CASE("sysfs: a vDPA device's binding: vhost_vdpa gives /dev/vhost-vdpa-N, virtio_vdpa the netdev") {
  TmpDir t;
  test::FakeSysfs fs(t.path + "/sys");
  fs.add_pf("0000:65:00.0", "pf0", 2);
  fs.add_vf("0000:65:00.0", 0, "0000:65:00.2", "mlx5_core");
  fs.add_vf("0000:65:00.0", 1, "0000:65:00.3", "mlx5_core");
  fs.add_vdpa("vdpa0", "0000:65:00.2", "vhost_vdpa", 4);
  fs.add_vdpa("vdpa1", "0000:65:00.3", "virtio_vdpa", 1, "eth7");
  auto vh = vdpa::read_binding(fs.root(), "vdpa0");
  REQUIRE(vh);
  CHECK(vh->driver == "vhost_vdpa");
  CHECK(vh->vhost_path == "/dev/vhost-vdpa-4");
  auto vi = vdpa::read_binding(fs.root(), "vdpa1");
  REQUIRE(vi);
  CHECK(vi->driver == "virtio_vdpa");
  CHECK(vi->netdev == "eth7");
  CHECK_FALSE(vdpa::read_binding(fs.root(), "vdpa7"));
}

TEST_CASE("PCI addresses: domain:bus:device.function") {
  CHECK(valid_pci_address("0000:03:00.2"));
  CHECK(valid_pci_address("0000:af:1f.7"));
  CHECK_FALSE(valid_pci_address("0000:03:20.0"));
  CHECK_FALSE(valid_pci_address("0000:03:00.8"));
  CHECK_FALSE(valid_pci_address("0000:03:00"));
  CHECK_FALSE(valid_pci_address("../../etc/x"));
}
