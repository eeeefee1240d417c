// Golden bytes for the rtnetlink messages plumb sends, and attribute-policy validation.
//
// The expected arrays are written out by hand from the kernel UAPI layouts (linux/netlink.h,
// linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h, linux/veth.h), not dumped from our own
// output. Multi-byte integers are host order (x86-64: little endian), addresses network order.
//   nlmsghdr  = u32 len | u16 type | u16 flags | u32 seq | u32 pid                 (16 bytes)
//   nlattr    = u16 len (header + payload, unpadded) | u16 type; payload padded to 4 bytes
//   ifinfomsg = u8 family | u8 pad | u16 type | s32 index | u32 flags | u32 change  (16 bytes)
//   ifaddrmsg = u8 family | u8 prefixlen | u8 flags | u8 scope | u32 index          (8 bytes)
//   rtmsg     = u8 family | dst_len | src_len | tos | table | protocol | scope | type | u32 flags (12)
// Builders leave seq and pid 0 (the socket fills them at send time); libmnl marks nests with
// NLA_F_NESTED (0x8000). NLM_F_ACK is added by the socket, so it is not in these bytes.
#include <doctest/doctest.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/golden.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;

using plumb::test::prefix;
using plumb::test::ip;
using plumb::test::mac;

TEST_CASE("golden: veth pair with the peer created in another namespace under its final name") {
  link::VethSpec spec;
  spec.host_name = "veth0";
  spec.peer_name = "eth0";
  spec.peer_netns_fd = 7;
  spec.mtu_bytes = 1400;
  spec.host_mac = mac("02:00:00:00:00:01");
  spec.peer_mac = mac("02:00:00:00:00:02");
  const Bytes want = {
      // nlmsghdr: len 144, RTM_NEWLINK (16), flags REQUEST|EXCL|CREATE = 0x0601, seq 0, pid 0
      0x90, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_UNSPEC, index 0, flags 0, change 0
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_IFNAME (3) len 10 "veth0\0" + 2 pad
      0x0a, 0x00, 0x03, 0x00, 'v', 'e', 't', 'h', '0', 0x00, 0x00, 0x00,
      // IFLA_MTU (4) len 8 u32 1400 = 0x578
      0x08, 0x00, 0x04, 0x00, 0x78, 0x05, 0x00, 0x00,
      // IFLA_ADDRESS (1) len 10 02:00:00:00:00:01 + 2 pad
      0x0a, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
      // IFLA_LINKINFO (18|NESTED = 0x8012) len 80
      0x50, 0x00, 0x12, 0x80,
      //   IFLA_INFO_KIND (1) len 9 "veth\0" + 3 pad
      0x09, 0x00, 0x01, 0x00, 'v', 'e', 't', 'h', 0x00, 0x00, 0x00, 0x00,
      //   IFLA_INFO_DATA (2|NESTED = 0x8002) len 64
      0x40, 0x00, 0x02, 0x80,
      //     VETH_INFO_PEER (1|NESTED = 0x8001) len 60
      0x3c, 0x00, 0x01, 0x80,
      //       ifinfomsg of the peer: all zero
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      //       IFLA_IFNAME (3) len 9 "eth0\0" + 3 pad
      0x09, 0x00, 0x03, 0x00, 'e', 't', 'h', '0', 0x00, 0x00, 0x00, 0x00,
      //       IFLA_NET_NS_FD (28 = 0x1c) len 8 u32 7
      0x08, 0x00, 0x1c, 0x00, 0x07, 0x00, 0x00, 0x00,
      //       IFLA_MTU (4) len 8 u32 1400
      0x08, 0x00, 0x04, 0x00, 0x78, 0x05, 0x00, 0x00,
      //       IFLA_ADDRESS (1) len 10 02:00:00:00:00:02 + 2 pad
      0x0a, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
  };
  check_bytes(link::build_create_veth(spec).bytes(), want);
}

TEST_CASE("golden: veth pair without options leaves out MTU, MAC and namespace") {
  link::VethSpec spec;
  spec.host_name = "a";
  spec.peer_name = "b";
  const Bytes want = {
      // nlmsghdr: len 88, RTM_NEWLINK, 0x0601
      0x58, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_IFNAME len 6 "a\0" + 2 pad
      0x06, 0x00, 0x03, 0x00, 'a', 0x00, 0x00, 0x00,
      // IFLA_LINKINFO len 48 > KIND "veth" (12) > INFO_DATA len 32 > PEER len 28 = hdr 4 +
      // ifinfomsg 16 + IFNAME "b" 8
      0x30, 0x00, 0x12, 0x80, 0x09, 0x00, 0x01, 0x00, 'v', 'e', 't', 'h', 0x00, 0x00, 0x00, 0x00,
      0x20, 0x00, 0x02, 0x80, 0x1c, 0x00, 0x01, 0x80,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x06, 0x00, 0x03, 0x00, 'b', 0x00, 0x00, 0x00,
  };
  check_bytes(link::build_create_veth(spec).bytes(), want);
}

TEST_CASE("golden: link modify (rename, MTU, up) is one RTM_NEWLINK with ifi_index") {
  link::LinkChange ch;
  ch.name = "eth1";
  ch.mtu_bytes = 9000;
  ch.up = true;
  const Bytes want = {
      // nlmsghdr: len 52, RTM_NEWLINK, flags REQUEST only
      0x34, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_UNSPEC, index 7, flags IFF_UP, change IFF_UP
      0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
      // IFLA_IFNAME len 9 "eth1\0" + 3 pad
      0x09, 0x00, 0x03, 0x00, 'e', 't', 'h', '1', 0x00, 0x00, 0x00, 0x00,
      // IFLA_MTU u32 9000 = 0x2328
      0x08, 0x00, 0x04, 0x00, 0x28, 0x23, 0x00, 0x00,
  };
  check_bytes(link::build_modify(7, ch).bytes(), want);
}

TEST_CASE("golden: IPv4 address add carries IFA_LOCAL, IFA_ADDRESS and IFA_BROADCAST") {
  const Bytes want = {
      // nlmsghdr: len 48, RTM_NEWADDR (20 = 0x14), flags 0x0601
      0x30, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifaddrmsg: AF_INET (2), prefixlen 24, flags 0, scope 0, index 5
      0x02, 0x18, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
      // IFA_LOCAL (2) 192.0.2.10
      0x08, 0x00, 0x02, 0x00, 0xc0, 0x00, 0x02, 0x0a,
      // IFA_ADDRESS (1) 192.0.2.10
      0x08, 0x00, 0x01, 0x00, 0xc0, 0x00, 0x02, 0x0a,
      // IFA_BROADCAST (4) 192.0.2.255
      0x08, 0x00, 0x04, 0x00, 0xc0, 0x00, 0x02, 0xff,
  };
  check_bytes(addr::build_add(5, prefix("192.0.2.10/24"), false).bytes(), want);
}

TEST_CASE("golden: IPv4 /32 address add has no broadcast") {
  const Bytes want = {
      // nlmsghdr: len 40
      0x28, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifaddrmsg: AF_INET, prefixlen 32, index 9
      0x02, 0x20, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
      // IFA_LOCAL, IFA_ADDRESS 203.0.113.7
      0x08, 0x00, 0x02, 0x00, 0xcb, 0x00, 0x71, 0x07, 0x08, 0x00, 0x01, 0x00, 0xcb, 0x00, 0x71, 0x07,
  };
  check_bytes(addr::build_add(9, prefix("203.0.113.7/32"), false).bytes(), want);
}

TEST_CASE("golden: IPv6 address add with nodad sets IFA_F_NODAD in ifa_flags and IFA_FLAGS") {
  const Bytes want = {
      // nlmsghdr: len 52, RTM_NEWADDR, flags 0x0601
      0x34, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifaddrmsg: AF_INET6 (10), prefixlen 64, flags IFA_F_NODAD (0x02), scope 0, index 5
      0x0a, 0x40, 0x02, 0x00, 0x05, 0x00, 0x00, 0x00,
      // IFA_ADDRESS (1) len 20 2001:db8::10
      0x14, 0x00, 0x01, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x10,
      // IFA_FLAGS (8) u32 IFA_F_NODAD
      0x08, 0x00, 0x08, 0x00, 0x02, 0x00, 0x00, 0x00,
  };
  check_bytes(addr::build_add(5, prefix("2001:db8::10/64"), true).bytes(), want);
}

TEST_CASE("golden: IPv4 default route via a gateway") {
  route::Route r;
  r.dst = prefix("0.0.0.0/0");
  r.gw = ip("192.0.2.1");
  r.oif = 3;
  const Bytes want = {
      // nlmsghdr: len 52, RTM_NEWROUTE (24 = 0x18), flags 0x0601
      0x34, 0x00, 0x00, 0x00, 0x18, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // rtmsg: AF_INET, dst_len 0, src_len 0, tos 0, table main (254), proto boot (3),
      //        scope universe (0), type unicast (1), flags 0
      0x02, 0x00, 0x00, 0x00, 0xfe, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
      // RTA_GATEWAY (5) 192.0.2.1  (no RTA_DST for a /0)
      0x08, 0x00, 0x05, 0x00, 0xc0, 0x00, 0x02, 0x01,
      // RTA_OIF (4) u32 3
      0x08, 0x00, 0x04, 0x00, 0x03, 0x00, 0x00, 0x00,
      // RTA_TABLE (15) u32 254
      0x08, 0x00, 0x0f, 0x00, 0xfe, 0x00, 0x00, 0x00,
  };
  check_bytes(route::build_add(r).bytes(), want);
}

TEST_CASE("golden: IPv6 default route via a gateway") {
  route::Route r;
  r.dst = prefix("::/0");
  r.gw = ip("2001:db8::1");
  r.oif = 3;
  const Bytes want = {
      // nlmsghdr: len 64, RTM_NEWROUTE, 0x0601
      0x40, 0x00, 0x00, 0x00, 0x18, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // rtmsg: AF_INET6 (10), dst_len 0, table 254, boot, universe, unicast
      0x0a, 0x00, 0x00, 0x00, 0xfe, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
      // RTA_GATEWAY len 20 2001:db8::1
      0x14, 0x00, 0x05, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x01,
      // RTA_OIF 3, RTA_TABLE 254
      0x08, 0x00, 0x04, 0x00, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x0f, 0x00, 0xfe, 0x00, 0x00, 0x00,
  };
  check_bytes(route::build_add(r).bytes(), want);
}

TEST_CASE("golden: link-scope route with metric, preferred source and MTU metric") {
  route::Route r;
  r.dst = prefix("198.51.100.0/24");
  r.oif = 3;
  r.priority = 100;
  r.prefsrc = ip("198.51.100.5");
  r.mtu_bytes = 1400;
  const Bytes want = {
      // nlmsghdr: len 80, RTM_NEWROUTE, 0x0601
      0x50, 0x00, 0x00, 0x00, 0x18, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // rtmsg: AF_INET, dst_len 24, table 254, boot, scope link (253 = 0xfd), unicast
      0x02, 0x18, 0x00, 0x00, 0xfe, 0x03, 0xfd, 0x01, 0x00, 0x00, 0x00, 0x00,
      // RTA_DST (1) 198.51.100.0
      0x08, 0x00, 0x01, 0x00, 0xc6, 0x33, 0x64, 0x00,
      // RTA_OIF (4) 3
      0x08, 0x00, 0x04, 0x00, 0x03, 0x00, 0x00, 0x00,
      // RTA_PRIORITY (6) 100
      0x08, 0x00, 0x06, 0x00, 0x64, 0x00, 0x00, 0x00,
      // RTA_PREFSRC (7) 198.51.100.5
      0x08, 0x00, 0x07, 0x00, 0xc6, 0x33, 0x64, 0x05,
      // RTA_TABLE (15) 254
      0x08, 0x00, 0x0f, 0x00, 0xfe, 0x00, 0x00, 0x00,
      // RTA_METRICS (8|NESTED) len 12 > RTAX_MTU (2) u32 1400
      0x0c, 0x00, 0x08, 0x80, 0x08, 0x00, 0x02, 0x00, 0x78, 0x05, 0x00, 0x00,
  };
  check_bytes(route::build_add(r).bytes(), want);
}

// ------------------------------------------------------------------------------------------
// Attribute validation

namespace {

/// An RTM_NEWLINK message (ifinfomsg header) followed by raw attribute bytes, in an aligned buffer.
struct RawLink {
  alignas(4) uint8_t buf[256] = {};
  const nlmsghdr* nlh() const { return reinterpret_cast<const nlmsghdr*>(buf); }
  explicit RawLink(const Bytes& attrs) {
    REQUIRE(16 + 16 + attrs.size() <= sizeof buf);
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    h->nlmsg_len = static_cast<uint32_t>(16 + 16 + attrs.size());
    h->nlmsg_type = RTM_NEWLINK;
    std::memcpy(buf + 32, attrs.data(), attrs.size());
  }
};

const std::vector<netlink::AttrPolicy> kPolicy = {
    {IFLA_MTU, MNL_TYPE_U32},
    {IFLA_IFNAME, MNL_TYPE_NUL_STRING},
};

}  // namespace

TEST_CASE("parse_attrs accepts well-formed attributes and stores only the ones in the policy") {
  // IFLA_MTU 1500 | IFLA_IFNAME "lo\0" | IFLA_TXQLEN (13, not in the policy) 1000
  RawLink m({0x08, 0x00, 0x04, 0x00, 0xdc, 0x05, 0x00, 0x00, 0x07, 0x00, 0x03, 0x00, 'l', 'o', 0x00, 0x00,
             0x08, 0x00, 0x0d, 0x00, 0xe8, 0x03, 0x00, 0x00});
  auto tb = netlink::parse_attrs(m.nlh(), sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE(tb);
  REQUIRE((*tb)[IFLA_MTU] != nullptr);
  CHECK(mnl_attr_get_u32((*tb)[IFLA_MTU]) == 1500);
  REQUIRE((*tb)[IFLA_IFNAME] != nullptr);
  CHECK(std::string(mnl_attr_get_str((*tb)[IFLA_IFNAME])) == "lo");
  CHECK((*tb)[IFLA_TXQLEN] == nullptr);  // present, but not validated: never exposed
}

TEST_CASE("parse_attrs rejects a u32 attribute with a 2-byte payload") {
  // IFLA_MTU with nla_len 6 (2-byte payload) + 2 pad
  RawLink m({0x06, 0x00, 0x04, 0x00, 0xdc, 0x05, 0x00, 0x00});
  auto tb = netlink::parse_attrs(m.nlh(), sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE_FALSE(tb);
  CHECK(tb.error().sys_errno == ERANGE);
  CHECK(tb.error().msg.find("type 4") != std::string::npos);
}

TEST_CASE("parse_attrs enforces exact integer sizes and binary minimum lengths") {
  // IFLA_MTU with an 8-byte payload is not a u32
  RawLink wide({0x0c, 0x00, 0x04, 0x00, 0xdc, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  auto tb = netlink::parse_attrs(wide.nlh(), sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE_FALSE(tb);
  CHECK(tb.error().sys_errno == ERANGE);
  // IFLA_ADDRESS of 3 bytes under a 6-byte minimum; 6 and 20 bytes pass
  const std::vector<netlink::AttrPolicy> hw = {{IFLA_ADDRESS, MNL_TYPE_BINARY, 6}};
  RawLink shortaddr({0x07, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00});
  auto tb2 = netlink::parse_attrs(shortaddr.nlh(), sizeof(ifinfomsg), IFLA_MAX, hw);
  REQUIRE_FALSE(tb2);
  CHECK(tb2.error().sys_errno == ERANGE);
  RawLink six({0x0a, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00});
  CHECK(netlink::parse_attrs(six.nlh(), sizeof(ifinfomsg), IFLA_MAX, hw).has_value());
  Bytes ib = {0x18, 0x00, 0x01, 0x00};
  ib.resize(4 + 20, 0x11);
  RawLink twenty(ib);
  CHECK(netlink::parse_attrs(twenty.nlh(), sizeof(ifinfomsg), IFLA_MAX, hw).has_value());
}

TEST_CASE("parse_attrs rejects a string attribute without its NUL terminator") {
  RawLink m({0x06, 0x00, 0x03, 0x00, 'l', 'o', 0x00, 0x00});
  auto tb = netlink::parse_attrs(m.nlh(), sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE_FALSE(tb);
  CHECK(tb.error().sys_errno == EINVAL);
}

TEST_CASE("parse_attrs rejects an attribute whose length runs past the message") {
  // IFLA_MTU claiming 16 bytes in an 8-byte remainder
  RawLink m({0x10, 0x00, 0x04, 0x00, 0xdc, 0x05, 0x00, 0x00});
  auto tb = netlink::parse_attrs(m.nlh(), sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE_FALSE(tb);
  CHECK(tb.error().sys_errno == EINVAL);
}

TEST_CASE("parse_attrs rejects a message shorter than its family header") {
  alignas(4) uint8_t buf[24] = {};
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  h->nlmsg_len = 24;  // 8 bytes of payload, ifinfomsg needs 16
  h->nlmsg_type = RTM_NEWLINK;
  auto tb = netlink::parse_attrs(h, sizeof(ifinfomsg), IFLA_MAX, kPolicy);
  REQUIRE_FALSE(tb);
  CHECK(tb.error().sys_errno == EINVAL);
}

TEST_CASE("parse_nested validates the nest's members") {
  // IFLA_LINKINFO { IFLA_INFO_KIND "veth\0" } then the same with a 3-byte u32 member
  netlink::Message good(RTM_NEWLINK, 0);
  good.put_header<ifinfomsg>();
  {
    netlink::Message::Nest n(good, IFLA_LINKINFO);
    good.put_str(IFLA_INFO_KIND, "veth");
  }
  auto tb = netlink::parse_attrs(good.header(), sizeof(ifinfomsg), IFLA_MAX, {{IFLA_LINKINFO, MNL_TYPE_NESTED}});
  REQUIRE(tb);
  REQUIRE((*tb)[IFLA_LINKINFO] != nullptr);
  auto info = netlink::parse_nested((*tb)[IFLA_LINKINFO], IFLA_INFO_MAX, {{IFLA_INFO_KIND, MNL_TYPE_NUL_STRING}});
  REQUIRE(info);
  REQUIRE((*info)[IFLA_INFO_KIND] != nullptr);
  CHECK(std::string(mnl_attr_get_str((*info)[IFLA_INFO_KIND])) == "veth");

  const uint8_t three[3] = {1, 2, 3};
  netlink::Message bad(RTM_NEWLINK, 0);
  bad.put_header<ifinfomsg>();
  {
    netlink::Message::Nest n(bad, IFLA_LINKINFO);
    bad.put(IFLA_INFO_KIND, three, sizeof three);
  }
  auto tb2 = netlink::parse_attrs(bad.header(), sizeof(ifinfomsg), IFLA_MAX, {{IFLA_LINKINFO, MNL_TYPE_NESTED}});
  REQUIRE(tb2);
  auto info2 = netlink::parse_nested((*tb2)[IFLA_LINKINFO], IFLA_INFO_MAX, {{IFLA_INFO_KIND, MNL_TYPE_U32}});
  REQUIRE_FALSE(info2);
  CHECK(info2.error().sys_errno == ERANGE);
}

// ------------------------------------------------------------------------------------------
// Message buffer

TEST_CASE("Message grows past its initial buffer and keeps earlier content and nest lengths") {
  netlink::Message m(RTM_NEWLINK, 0);
  m.put_header<ifinfomsg>();
  std::vector<uint8_t> big(10000, 0xab);
  {
    netlink::Message::Nest n(m, IFLA_AF_SPEC);
    m.put_u32(IFLA_MTU, 1500);
    m.put(IFLA_ADDRESS, big.data(), big.size());  // forces growth inside an open nest
  }
  CHECK_FALSE(m.overflowed());
  CHECK(m.size() == 16 + 16 + 4 + 8 + 4 + 10000);
  auto tb = netlink::parse_attrs(m.header(), sizeof(ifinfomsg), IFLA_MAX, {{IFLA_AF_SPEC, MNL_TYPE_NESTED}});
  REQUIRE(tb);
  REQUIRE((*tb)[IFLA_AF_SPEC] != nullptr);
  CHECK(mnl_attr_get_payload_len((*tb)[IFLA_AF_SPEC]) == 8 + 4 + 10000);
  auto in = netlink::parse_nested((*tb)[IFLA_AF_SPEC], IFLA_MAX,
                                  {{IFLA_MTU, MNL_TYPE_U32}, {IFLA_ADDRESS, MNL_TYPE_BINARY, 10000}});
  REQUIRE(in);
  CHECK(mnl_attr_get_u32((*in)[IFLA_MTU]) == 1500);
  CHECK(std::memcmp(mnl_attr_get_payload((*in)[IFLA_ADDRESS]), big.data(), big.size()) == 0);
}

TEST_CASE("Message flags an attribute too large for nla_len instead of truncating it") {
  netlink::Message m(RTM_NEWLINK, 0);
  m.put_header<ifinfomsg>();
  std::vector<uint8_t> huge(70000, 1);
  m.put(IFLA_ADDRESS, huge.data(), huge.size());
  CHECK(m.overflowed());
  CHECK(m.size() == 32);  // nothing appended
}

// ------------------------------------------------------------------------------------------
// Names and keys

TEST_CASE("valid_ifname follows the kernel's rules") {
  CHECK(link::valid_ifname("eth0"));
  CHECK(link::valid_ifname("veth1234567890a"));   // 15 bytes
  CHECK(link::valid_ifname("eth0.100"));
  CHECK_FALSE(link::valid_ifname(""));
  CHECK_FALSE(link::valid_ifname("veth1234567890ab"));  // 16 bytes
  CHECK_FALSE(link::valid_ifname("."));
  CHECK_FALSE(link::valid_ifname(".."));
  CHECK_FALSE(link::valid_ifname("a/b"));
  CHECK_FALSE(link::valid_ifname("a:b"));
  CHECK_FALSE(link::valid_ifname("a b"));
  CHECK_FALSE(link::valid_ifname("a\tb"));
  CHECK_FALSE(link::valid_ifname("eth%d"));
  CHECK_FALSE(link::valid_ifname("%"));
  CHECK_FALSE(link::valid_ifname(std::string("a\0b", 3)));
  CHECK(link::valid_ifname("net-1.100"));
}

TEST_CASE("sysctl keys accept '/' and '.' forms and never leave /proc/sys") {
  CHECK(sysctl::path_of("net/ipv4/ip_forward").value() == "/proc/sys/net/ipv4/ip_forward");
  CHECK(sysctl::path_of("net.ipv4.ip_forward").value() == "/proc/sys/net/ipv4/ip_forward");
  CHECK(sysctl::path_of("net/ipv4/conf/eth0.100/arp_notify").value() == "/proc/sys/net/ipv4/conf/eth0.100/arp_notify");
  CHECK(sysctl::path_of("net.ipv4.conf.eth0/100.arp_notify").value() == "/proc/sys/net/ipv4/conf/eth0.100/arp_notify");
  for (const char* bad : {"", "/net/ipv4/ip_forward", "net/../../etc/passwd", "net..ipv4", "net/ipv4/", "..",
                          "net/./ipv4", "net.ipv4..ip_forward"}) {
    INFO(bad);
    auto p = sysctl::path_of(bad);
    REQUIRE_FALSE(p);
    CHECK(p.error().sys_errno == EINVAL);
  }
}
