// engine/kernel/netconf_watch against the real kernel, inside a private node namespace per case:
// a remembered fact is forgotten when another party changes it (an address of a watched link
// removed, forwarding turned off), kept through changes the filter drops (another link's
// addresses and forwarding), and ensure_forwarding with a watch asks the kernel only once.
#include "engine/kernel/netconf_watch.hpp"

#include <doctest/doctest.h>
#include <sys/socket.h>

#include <string>

#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/syscall_count.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE(
    "netconf watch: a watched link's address removed by another party is forgotten; another link's address "
    "changes and per-link forwarding are filtered out") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  REQUIRE(plumb::test::sh(
              // The links stay down: an IPv6 address of a link that is up is announced again later by
              // the kernel's address work (DAD's completion, even with nodad), which would race the
              // watch's first refresh.
              "ip link add w0 type veth peer name w0p && ip link add w1 type veth peer name w1p && "
              "ip addr add 192.0.2.1/24 dev w0 && ip addr add 2001:db8::1/64 dev w0 nodad")
              .exit_code == 0);
  const int w0 = must_get(nl, "w0").index;
  auto opened = netconf::Watch::open();
  REQUIRE_OK(opened);
  netconf::Watch& w = **opened;
  const IpPrefix v4 = IpPrefix::parse("192.0.2.1/24").value();
  const IpPrefix v6 = IpPrefix::parse("2001:db8::1/64").value();
  REQUIRE_OK(w.watch_addresses(w0));
  w.refresh();
  w.note_address(w0, v4);
  w.note_address(w0, v6);
  CHECK(w.has_address(w0, v4));
  CHECK(w.has_address(w0, v6));

  // Other links' addresses and their own forwarding switches do not reach the watch.
  REQUIRE(plumb::test::sh("ip addr add 198.51.100.1/24 dev w1 && ip addr add 2001:db8:1::1/64 dev w1 nodad && "
                          "sysctl -qw net.ipv6.conf.w1.forwarding=1 net.ipv4.conf.w1.forwarding=1")
              .exit_code == 0);
  w.refresh();
  CHECK(w.forgotten() == 0);
  CHECK(w.has_address(w0, v4));

  // The watched link's address removed: forgotten, whichever family.
  REQUIRE(plumb::test::sh("ip addr del 2001:db8::1/64 dev w0").exit_code == 0);
  w.refresh();
  CHECK(w.forgotten() == 1);
  CHECK_FALSE(w.has_address(w0, v6));
  CHECK_FALSE(w.has_address(w0, v4));  // everything goes: the next use asks again
  w.note_address(w0, v4);
  REQUIRE(plumb::test::sh("ip addr flush dev w0").exit_code == 0);
  w.refresh();
  CHECK_FALSE(w.has_address(w0, v4));
  // A link never watched is never remembered.
  w.note_address(must_get(nl, "w1").index, v4);
  CHECK_FALSE(w.has_address(must_get(nl, "w1").index, v4));
}

TEST_CASE(
    "netconf watch: ensure_forwarding asks the kernel once while forwarding stays on, and turns it on again "
    "after another party turned it off") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  auto opened = netconf::Watch::open();
  REQUIRE_OK(opened);
  netconf::Watch& w = **opened;
  for (int family : {AF_INET, AF_INET6}) {
    CAPTURE(family);
    const std::string key = family == AF_INET6 ? "net/ipv6/conf/all/forwarding" : "net/ipv4/ip_forward";
    REQUIRE_OK(sysctl::write(key, "0"));
    REQUIRE_OK(netconf::ensure_forwarding(nl, family, &w));  // off: asked, written
    CHECK(sysctl::read(key).value() == "1");
    REQUIRE_OK(netconf::ensure_forwarding(nl, family, &w));  // its own write seen: asked again, on
    // On, and nothing changed since: no request.
    CHECK(plumb::test::count_syscalls("sendto", [&] { REQUIRE_OK(netconf::ensure_forwarding(nl, family, &w)); }) == 0);
    // Another party turns it off: the next call sees the notification, asks and repairs.
    REQUIRE(plumb::test::sh(std::string("sysctl -qw ") +
                            (family == AF_INET6 ? "net.ipv6.conf.all.forwarding=0" : "net.ipv4.ip_forward=0"))
                .exit_code == 0);
    CHECK(plumb::test::count_syscalls("sendto", [&] { REQUIRE_OK(netconf::ensure_forwarding(nl, family, &w)); }) == 1);
    CHECK(sysctl::read(key).value() == "1");
  }
}
