// engine/kernel/sysctl: keys in '/' and '.' form never leave /proc/sys (no privileges), and a
// per-interface key read and written inside a Guard in a pod namespace (a private node namespace
// per case).
#include "engine/kernel/sysctl.hpp"

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
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/route.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

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

TEST_CASE("sysctl: read and write a per-interface key inside a Guard in the pod namespace") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "s0", "eth0", ns.fd());

  {
    auto g = netns::Guard::enter(ns);
    REQUIRE_OK(g);
    auto v0 = sysctl::read("net/ipv4/conf/eth0/arp_notify");
    REQUIRE_OK(v0);
    CHECK(*v0 == "0");
    REQUIRE_OK(sysctl::write("net/ipv4/conf/eth0/arp_notify", "1"));
    auto v1 = sysctl::read("net.ipv4.conf.eth0.arp_notify");
    REQUIRE_OK(v1);
    CHECK(*v1 == "1");
  }
  // Independent check from inside the pod, and the node has no such interface.
  auto p = plumb::test::sh("ip netns exec pod1 cat /proc/sys/net/ipv4/conf/eth0/arp_notify");
  REQUIRE(p.exit_code == 0);
  CHECK(p.out == "1\n");
  auto node_side = sysctl::read("net/ipv4/conf/eth0/arp_notify");
  REQUIRE_FALSE(node_side);
  CHECK(node_side.error().sys_errno == ENOENT);
  CHECK(node_side.error().msg.find("net/ipv4/conf/eth0/arp_notify") != std::string::npos);
  auto node_s0 = sysctl::read("net/ipv4/conf/s0/arp_notify");
  REQUIRE_OK(node_s0);
  CHECK(*node_s0 == "0");

  auto bad = sysctl::write("net/ipv4/conf/s0/arp_notify", "not-a-number");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().sys_errno == EINVAL);
  auto esc = sysctl::read("net/../../../etc/hostname");
  REQUIRE_FALSE(esc);
  CHECK(esc.error().cni_code == cni_code::kInvalidConfig);
}
