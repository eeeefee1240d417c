// engine/kernel/ifname.hpp: the kernel's rule for interface names (dev_valid_name), plus '%'
// refused.
#include "engine/kernel/ifname.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace plumb;

TEST_CASE("valid_ifname follows the kernel's rules") {
  CHECK(link::valid_ifname("eth0"));
  CHECK(link::valid_ifname("veth1234567890a"));  // 15 bytes
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
