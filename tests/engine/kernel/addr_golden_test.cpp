// Golden bytes for the address messages engine/kernel/addr sends. Written out by hand from the
// kernel UAPI layouts (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h), not dumped from our
// own output. Multi-byte integers are host order (x86-64: little endian), addresses network order.
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

TEST_CASE("golden: IPv4 address add carries IFA_LOCAL, IFA_ADDRESS and IFA_BROADCAST") {
  // clang-format off
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
  // clang-format on
  check_bytes(addr::build_add(5, prefix("192.0.2.10/24"), false).bytes(), want);
}

TEST_CASE("golden: IPv4 /32 address add has no broadcast") {
  // clang-format off
  const Bytes want = {
      // nlmsghdr: len 40
      0x28, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifaddrmsg: AF_INET, prefixlen 32, index 9
      0x02, 0x20, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
      // IFA_LOCAL, IFA_ADDRESS 203.0.113.7
      0x08, 0x00, 0x02, 0x00, 0xcb, 0x00, 0x71, 0x07, 0x08, 0x00, 0x01, 0x00, 0xcb, 0x00, 0x71, 0x07,
  };
  // clang-format on
  check_bytes(addr::build_add(9, prefix("203.0.113.7/32"), false).bytes(), want);
}

TEST_CASE("golden: IPv6 address add with nodad sets IFA_F_NODAD in ifa_flags and IFA_FLAGS") {
  // clang-format off
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
  // clang-format on
  check_bytes(addr::build_add(5, prefix("2001:db8::10/64"), true).bytes(), want);
}
