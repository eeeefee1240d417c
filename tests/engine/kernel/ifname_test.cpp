// engine/kernel/ifname.hpp: the kernel's rule for interface names (dev_valid_name), plus '%'
// refused.
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
