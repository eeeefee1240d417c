// engine/kernel/netconf against the real kernel, inside a private node namespace per case:
// forwarding read over RTM_GETNETCONF, and ensure_forwarding writing only when forwarding is off.
#include "engine/kernel/netconf.hpp"

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

#include "engine/base/netns.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE(
    "netconf: forwarding read over rtnetlink; ensure_forwarding writes only when off, so an unchanged "
    "net.ipv6.conf.all.forwarding leaves a device's own forwarding alone") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  REQUIRE(plumb::test::sh("ip link add s7 type veth peer name s7p").exit_code == 0);
  // What RTM_GETNETCONF reports is what /proc/sys holds, both ways, both families.
  for (const char* v : {"0", "1"}) {
    REQUIRE_OK(sysctl::write("net/ipv4/ip_forward", v));
    REQUIRE_OK(sysctl::write("net/ipv6/conf/all/forwarding", v));
    auto v4 = netconf::forwarding_all(nl, AF_INET);
    auto v6 = netconf::forwarding_all(nl, AF_INET6);
    REQUIRE_OK(v4);
    REQUIRE_OK(v6);
    CHECK(*v4 == (v[0] == '1'));
    CHECK(*v6 == (v[0] == '1'));
  }
  REQUIRE_OK(sysctl::write("net/ipv6/conf/s7/forwarding", "0"));
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET6));  // off: written
  auto all = sysctl::read("net/ipv6/conf/all/forwarding");
  REQUIRE_OK(all);
  CHECK(*all == "1");
  REQUIRE_OK(sysctl::write("net/ipv6/conf/s7/forwarding", "0"));
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET6));  // already on: nothing written
  auto own = sysctl::read("net/ipv6/conf/s7/forwarding");
  REQUIRE_OK(own);
  CHECK(*own == "0");
  REQUIRE_OK(sysctl::write("net/ipv6/conf/all/forwarding", "1"));  // what a plain write does to it
  own = sysctl::read("net/ipv6/conf/s7/forwarding");
  REQUIRE_OK(own);
  CHECK(*own == "1");
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET));
  auto v4 = sysctl::read("net/ipv4/ip_forward");
  REQUIRE_OK(v4);
  CHECK(*v4 == "1");
}
