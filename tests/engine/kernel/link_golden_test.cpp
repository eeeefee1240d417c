// Golden bytes for the link messages the macvlan, host-device and tuning drivers send.
//
// Written out by hand from the kernel UAPI layouts (linux/netlink.h, linux/rtnetlink.h,
// linux/if_link.h), not dumped from our own output. Host order integers (x86-64 little endian).
//   nlmsghdr  = u32 len | u16 type | u16 flags | u32 seq | u32 pid                 (16 bytes)
//   nlattr    = u16 len (header + payload, unpadded) | u16 type; payload padded to 4 bytes
//   ifinfomsg = u8 family | u8 pad | u16 type | s32 index | u32 flags | u32 change  (16 bytes)
// Builders leave seq and pid 0; libmnl marks nests with NLA_F_NESTED (0x8000); NLM_F_ACK is added
// by the socket, so it is not in these bytes.
#include <doctest/doctest.h>
#include <linux/if_link.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "engine/kernel/link.hpp"

using namespace plumb;
using Bytes = std::vector<uint8_t>;

namespace {

static_assert(std::endian::native == std::endian::little, "golden arrays are written for little-endian hosts");

Mac mac(const char* s) {
  auto m = Mac::parse(s);
  REQUIRE(m);
  return *m;
}

void check_bytes(const Bytes& got, const Bytes& want) {
  size_t first = 0;
  while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
  INFO("sizes got ", got.size(), " want ", want.size(), "; first difference at offset ", first);
  CHECK(got == want);
}

}  // namespace

TEST_CASE("golden: macvlan born in another namespace with MTU, MAC and bridge mode") {
  link::MacvlanSpec spec;
  spec.name = "mvl0";
  spec.master_index = 3;
  spec.mode = MACVLAN_MODE_BRIDGE;
  spec.mtu_bytes = 1400;
  spec.mac = mac("02:00:00:00:00:03");
  spec.netns_fd = 9;
  const Bytes want = {
      // nlmsghdr: len 108, RTM_NEWLINK (16), flags REQUEST|EXCL|CREATE = 0x0601, seq 0, pid 0
      0x6c, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_UNSPEC, index 0, flags 0, change 0
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_IFNAME (3) len 9 "mvl0\0" + 3 pad
      0x09, 0x00, 0x03, 0x00, 'm', 'v', 'l', '0', 0x00, 0x00, 0x00, 0x00,
      // IFLA_LINK (5) u32 3: the master
      0x08, 0x00, 0x05, 0x00, 0x03, 0x00, 0x00, 0x00,
      // IFLA_MTU (4) u32 1400 = 0x578
      0x08, 0x00, 0x04, 0x00, 0x78, 0x05, 0x00, 0x00,
      // IFLA_ADDRESS (1) len 10 02:00:00:00:00:03 + 2 pad
      0x0a, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00,
      // IFLA_NET_NS_FD (28 = 0x1c) u32 9
      0x08, 0x00, 0x1c, 0x00, 0x09, 0x00, 0x00, 0x00,
      // IFLA_LINKINFO (18|NESTED = 0x8012) len 28
      0x1c, 0x00, 0x12, 0x80,
      //   IFLA_INFO_KIND (1) len 12 "macvlan\0"
      0x0c, 0x00, 0x01, 0x00, 'm', 'a', 'c', 'v', 'l', 'a', 'n', 0x00,
      //   IFLA_INFO_DATA (2|NESTED = 0x8002) len 12
      0x0c, 0x00, 0x02, 0x80,
      //     IFLA_MACVLAN_MODE (1) u32 MACVLAN_MODE_BRIDGE = 4
      0x08, 0x00, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00,
  };
  check_bytes(link::build_create_macvlan(spec).bytes(), want);
}

TEST_CASE("golden: macvlan without options leaves out MTU, MAC and namespace (private mode)") {
  link::MacvlanSpec spec;
  spec.name = "m";
  spec.master_index = 2;
  spec.mode = MACVLAN_MODE_PRIVATE;
  const Bytes want = {
      // nlmsghdr: len 76, RTM_NEWLINK, 0x0601
      0x4c, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_IFNAME len 6 "m\0" + 2 pad
      0x06, 0x00, 0x03, 0x00, 'm', 0x00, 0x00, 0x00,
      // IFLA_LINK u32 2
      0x08, 0x00, 0x05, 0x00, 0x02, 0x00, 0x00, 0x00,
      // IFLA_LINKINFO len 28 > KIND "macvlan" > INFO_DATA len 12 > MACVLAN_MODE u32 1 (private)
      0x1c, 0x00, 0x12, 0x80, 0x0c, 0x00, 0x01, 0x00, 'm', 'a', 'c', 'v', 'l', 'a', 'n', 0x00,
      0x0c, 0x00, 0x02, 0x80, 0x08, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00,
  };
  check_bytes(link::build_create_macvlan(spec).bytes(), want);
}

TEST_CASE("golden: moving a link into another namespace under a new name is one RTM_NEWLINK") {
  // host-device: IFLA_NET_NS_FD moves the device, IFLA_IFNAME (with ifi_index set) renames it in
  // the target namespace afterwards.
  link::LinkChange ch;
  ch.name = "net1";
  ch.netns_fd = 7;
  const Bytes want = {
      // nlmsghdr: len 52, RTM_NEWLINK, flags REQUEST only
      0x34, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_UNSPEC, index 5, flags 0, change 0
      0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_IFNAME len 9 "net1\0" + 3 pad
      0x09, 0x00, 0x03, 0x00, 'n', 'e', 't', '1', 0x00, 0x00, 0x00, 0x00,
      // IFLA_NET_NS_FD (28) u32 7
      0x08, 0x00, 0x1c, 0x00, 0x07, 0x00, 0x00, 0x00,
  };
  check_bytes(link::build_modify(5, ch).bytes(), want);
}

TEST_CASE("golden: tuning's link change sets MTU, MAC, txqueuelen and promisc/allmulti flags") {
  link::LinkChange ch;
  ch.mac = mac("02:00:00:00:00:05");
  ch.mtu_bytes = 1300;
  ch.promisc = true;
  ch.allmulti = false;
  ch.txqlen = 500;
  const Bytes want = {
      // nlmsghdr: len 60, RTM_NEWLINK, flags REQUEST only
      0x3c, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_UNSPEC, index 4, flags IFF_PROMISC (0x100), change IFF_PROMISC|IFF_ALLMULTI (0x300)
      0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00,
      // IFLA_MTU (4) u32 1300 = 0x514
      0x08, 0x00, 0x04, 0x00, 0x14, 0x05, 0x00, 0x00,
      // IFLA_ADDRESS (1) 02:00:00:00:00:05 + 2 pad
      0x0a, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
      // IFLA_TXQLEN (13) u32 500 = 0x1f4
      0x08, 0x00, 0x0d, 0x00, 0xf4, 0x01, 0x00, 0x00,
  };
  check_bytes(link::build_modify(4, ch).bytes(), want);
}

TEST_CASE("golden: setting a link down clears IFF_UP through ifi_change only") {
  link::LinkChange ch;
  ch.up = false;
  const Bytes want = {
      // nlmsghdr: len 32, RTM_NEWLINK, flags REQUEST only
      0x20, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: index 6, flags 0, change IFF_UP
      0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
  };
  check_bytes(link::build_modify(6, ch).bytes(), want);
}
