// engine/netlink/message without the kernel: the Message builder (growth past its initial buffer,
// attributes too large for nla_len) and attribute-policy validation of parse_attrs and
// parse_nested.
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
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/literals.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;

using plumb::test::ip;
using plumb::test::mac;
using plumb::test::prefix;

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
  RawLink m({0x08, 0x00, 0x04, 0x00, 0xdc, 0x05, 0x00, 0x00, 0x07, 0x00, 0x03, 0x00,
             'l',  'o',  0x00, 0x00, 0x08, 0x00, 0x0d, 0x00, 0xe8, 0x03, 0x00, 0x00});
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
