// engine/kernel/addr against the real kernel, inside a private node namespace per case: IPv4 and
// IPv6 addresses added, listed and removed; whether the kernel skips IPv6 duplicate address
// detection on a link (addr::dad_skipped), compared with what the kernel then does to a new
// address. Kernel state is checked independently through iproute2 (`ip -j ...`).
#include "engine/kernel/addr.hpp"

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
#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE("addresses: add, list and remove IPv4 and IPv6 (nodad visible to iproute2)") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "a0", "a1");
  set_up(nl, "a0");
  set_up(nl, "a1");
  int idx = must_get(nl, "a0").index;

  REQUIRE_OK(addr::add(nl, idx, prefix("192.0.2.10/24")));
  REQUIRE_OK(addr::add(nl, idx, prefix("2001:db8::10/64"), true));

  auto j = plumb::test::ip_json("addr show dev a0");
  bool saw4 = false, saw6 = false;
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    if (local == "192.0.2.10") {
      saw4 = true;
      CHECK(a["prefixlen"].GetInt() == 24);
      CHECK(str(a, "broadcast") == "192.0.2.255");
    }
    if (local == "2001:db8::10") {
      saw6 = true;
      CHECK(a["prefixlen"].GetInt() == 64);
      CHECK(a.HasMember("nodad"));
      CHECK(a["nodad"].GetBool());
      CHECK_FALSE(a.HasMember("tentative"));
    }
  }
  CHECK(saw4);
  CHECK(saw6);

  auto v4 = addr::list(nl, idx, AF_INET);
  REQUIRE_OK(v4);
  REQUIRE(v4->size() == 1);
  CHECK((*v4)[0].prefix.str() == "192.0.2.10/24");
  CHECK((*v4)[0].index == idx);
  CHECK((*v4)[0].scope == RT_SCOPE_UNIVERSE);

  auto v6 = addr::list(nl, idx, AF_INET6);
  REQUIRE_OK(v6);
  auto it =
      std::find_if(v6->begin(), v6->end(), [](const addr::AddrInfo& a) { return a.prefix.str() == "2001:db8::10/64"; });
  REQUIRE(it != v6->end());
  CHECK((it->flags & IFA_F_NODAD) != 0);
  for (const auto& a : *v6) CHECK(a.prefix.addr.family == AF_INET6);

  auto all = addr::list(nl);
  REQUIRE_OK(all);
  std::set<std::string> seen;
  for (const auto& a : *all) seen.insert(a.prefix.str());
  CHECK(seen.count("127.0.0.1/8") == 1);  // lo, another link
  CHECK(seen.count("192.0.2.10/24") == 1);
  CHECK(seen.count("2001:db8::10/64") == 1);

  auto dup = addr::add(nl, idx, prefix("192.0.2.10/24"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  CHECK(dup.error().cni_code == cni_code::kConflict);

  for (const char* p : {"192.0.2.10/24", "2001:db8::10/64"}) {
    INFO(p);
    auto rm = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm);
    CHECK(*rm);
    auto rm2 = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm2);
    CHECK_FALSE(*rm2);
  }
  j = plumb::test::ip_json("addr show dev a0");
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    CHECK(local != "192.0.2.10");
    CHECK(local != "2001:db8::10");
  }
}

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

TEST_CASE(
    "dad_skipped: true only where the kernel skips detection (link and all both off, or IFF_NOARP); a new address then "
    "is never left tentative by detection") {
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
  for (const Case c : {Case{"0", "0", true}, Case{"1", "0", false}, Case{"0", "1", false}, Case{"1", "1", false},
                       Case{"0", "2", false}}) {
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

TEST_CASE(
    "dad_skipped from a link answer: link::get reports the link's own accept_dad, and the answer decides without a "
    "look-up "
    "of its own (a stale answer is believed)") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  netns::Netns self = open_ns("/proc/thread-self/ns/net");
  make_veth(nl, "e0", "e1");
  set("net/ipv6/conf/all/accept_dad", "0");
  for (const char* v : {"0", "1", "2"}) {
    CAPTURE(v);
    set("net/ipv6/conf/e0/accept_dad", v);
    const link::LinkInfo answer = must_get(nl, "e0");
    REQUIRE(answer.inet6_accept_dad.has_value());
    CHECK(*answer.inet6_accept_dad == std::stoi(v));
    auto from_answer = addr::dad_skipped(answer, self);
    auto looked_up = addr::dad_skipped(nl, self, answer.index);
    REQUIRE_OK(from_answer);
    REQUIRE_OK(looked_up);
    CHECK(*from_answer == (std::string(v) == "0"));
    CHECK(*from_answer == *looked_up);
  }

  // The link changed after the answer: the answer's accept_dad (on) still decides, a look-up sees it off.
  set("net/ipv6/conf/e0/accept_dad", "1");
  const link::LinkInfo before = must_get(nl, "e0");
  set("net/ipv6/conf/e0/accept_dad", "0");
  auto stale = addr::dad_skipped(before, self);
  auto fresh = addr::dad_skipped(nl, self, before.index);
  REQUIRE_OK(stale);
  REQUIRE_OK(fresh);
  CHECK_FALSE(*stale);
  CHECK(*fresh);

  // An answer without IPv6 configuration (inet6_accept_dad unset): not skipped.
  link::LinkInfo no_v6 = before;
  no_v6.inet6_accept_dad.reset();
  no_v6.flags |= IFF_NOARP;
  auto none = addr::dad_skipped(no_v6, self);
  REQUIRE_OK(none);
  CHECK_FALSE(*none);
}
