// engine/kernel/addr against the real kernel, inside a private node namespace per case: whether
// the kernel skips IPv6 duplicate address detection on a link (addr::dad_skipped), set up
// through /proc/sys and iproute2 and compared with what the kernel then does to a new address.
#include <doctest/doctest.h>
#include <linux/if_addr.h>
#include <sys/socket.h>

#include <string>

#include "engine/base/netns.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/sysctl.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

namespace {

void set(const std::string& key, const char* value) { REQUIRE_OK(sysctl::write(key, value)); }

/// The flags of address `a` on link `index` (it must be there).
uint32_t flags_of(netlink::Socket& nl, int index, const IpAddr& a) {
  auto addrs = addr::list(nl, index, AF_INET6);
  REQUIRE_OK(addrs);
  for (const auto& x : *addrs) {
    if (x.prefix.addr == a) return x.flags;
  }
  FAIL("address ", a.str(), " is not on link ", index);
  return 0;
}

}  // namespace

TEST_CASE("dad_skipped: true only where the kernel skips detection (link and all both off, or IFF_NOARP); a new address then is never left tentative by detection") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  netns::Netns self = open_ns("/proc/thread-self/ns/net");
  make_veth(nl, "d0", "d1");
  const int d0 = must_get(nl, "d0").index;

  struct Case {
    const char* all;
    const char* link;
    bool skipped;
  };
  for (const Case c : {Case{"0", "0", true}, Case{"1", "0", false}, Case{"0", "1", false}, Case{"1", "1", false}, Case{"0", "2", false}}) {
    const std::string all = c.all, link = c.link;
    CAPTURE(all);
    CAPTURE(link);
    set("net/ipv6/conf/all/accept_dad", c.all);
    set("net/ipv6/conf/d0/accept_dad", c.link);
    auto got = addr::dad_skipped(nl, self, d0);
    REQUIRE_OK(got);
    CHECK(*got == c.skipped);
  }

  // IFF_NOARP: skipped whatever the switches say.
  set("net/ipv6/conf/all/accept_dad", "1");
  set("net/ipv6/conf/d0/accept_dad", "1");
  REQUIRE(plumb::test::sh("ip link set dev d0 arp off").exit_code == 0);
  auto noarp = addr::dad_skipped(nl, self, d0);
  REQUIRE_OK(noarp);
  CHECK(*noarp);
  REQUIRE(plumb::test::sh("ip link set dev d0 arp on").exit_code == 0);

  // What a false answer means: detection runs, and an address added to the running link is
  // tentative while its probe is out (a second).
  REQUIRE(plumb::test::sh("ip link set dev d0 up && ip link set dev d1 up").exit_code == 0);
  const IpAddr probed = ip("2001:db8:7::1");
  REQUIRE_OK(addr::add(nl, d0, IpPrefix{probed, 64}, /*nodad=*/false));
  CHECK((flags_of(nl, d0, probed) & IFA_F_TENTATIVE) != 0);
}

TEST_CASE("dad_skipped: a link without IPv6 configuration, or none at all, is not skipped") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  netns::Netns self = open_ns("/proc/thread-self/ns/net");
  auto gone = addr::dad_skipped(nl, self, 999999);
  REQUIRE_OK(gone);
  CHECK_FALSE(*gone);
}
