// The invocation's kernel handles (cni-entry/pod/attach.cpp open_kernel), in a private node
// namespace: the node socket is the thread's shared one, so a daemon worker's invocations do not
// each open and close an rtnetlink socket; the node's own namespace is never taken as a pod's; a
// daemon worker's node watch, and the repairs of its next ADD after another party's changes.
#include "cni-entry/pod/attach.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/netlink.h>

#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/support/plumb_daemon.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using plumb::pod::open_kernel;
using plumb::test::Node;

TEST_CASE("open_kernel: every invocation of a thread uses the one shared node socket") {
  Node node;
  int fd = -1;
  {
    auto first = open_kernel("", false);
    REQUIRE(first);
    auto second = open_kernel("", false);  // the first still held: an open of its own would be a second descriptor
    REQUIRE(second);
    REQUIRE((first->node && second->node));
    fd = first->node->fd();
    CHECK(second->node->fd() == fd);
    auto shared = plumb::netlink::shared(NETLINK_ROUTE);
    REQUIRE(shared);
    CHECK((*shared)->fd() == fd);
  }
  auto next = open_kernel("", false);  // the invocations ended; the socket stayed for the next
  REQUIRE(next);
  CHECK(next->node->fd() == fd);
  CHECK(::fcntl(fd, F_GETFD) >= 0);
}

TEST_CASE("open_kernel: after a move to another node namespace, the node socket is that namespace's") {
  {
    Node node;
    auto k = open_kernel("", false);
    REQUIRE(k);
  }
  Node other;  // the thread's shared socket of the namespace before must not answer for this one
  REQUIRE(plumb::test::sh("ip link add hop0 type veth peer name hop1").exit_code == 0);
  auto k = open_kernel("", false);
  REQUIRE(k);
  auto link = plumb::link::get(*k->node, "hop0");
  REQUIRE(link);
  CHECK(link->has_value());
}

TEST_CASE("open_kernel: the node's own namespace is refused as a pod's") {
  Node node;
  auto k = open_kernel("/proc/self/ns/net", true);
  REQUIRE_FALSE(k);
  CHECK(k.error().cni_code == plumb::cni_code::kInvalidEnv);
  auto gone = open_kernel("/proc/self/ns/net", false);
  REQUIRE(gone);
  CHECK(gone->netns_is_node);
  CHECK_FALSE(gone->pod);
}

TEST_CASE(
    "a daemon worker remembers the bridge's gateway address and forwarding through a notification socket; another "
    "party's removal of both between two ADDs of that worker is repaired by the next") {
  Node node;
  REQUIRE(plumb::test::sh("sysctl -qw net.ipv6.conf.default.addr_gen_mode=1").exit_code == 0);
  plumb::test::PodFixture fx(node);
  plumb::test::Daemon d{std::vector<std::string>{"--workers", "1"}};
  fx.add_nad("default", "warm", R"({"cniVersion": "1.0.0", "type": "bridge", "bridge": "brwarm", "isGateway": true,
    "ipam": {"type": "static", "addresses": [{"address": "198.51.100.5/24"}]}})");
  auto add = [&](const std::string& pod) {
    fx.add_pod("default", pod, R"([{"name": "warm", "interface": "net1"}])");
    plumb::test::Proc p = fx.run_with(plumb::test::plumb_shim_binary(), {{"PLUMB_DAEMON_SOCKET", d.socket}}, "ADD",
                                      "ctr-" + pod, node.add_netns(pod), "default", pod, fx.config());
    REQUIRE_MESSAGE(p.exit_code == 0, p.out << p.err << plumb::test::read_file(d.log));
  };
  add("p1");
  add("p2");
  // The worker's watch: a NETLINK_ROUTE socket in the node namespace subscribed to the address and
  // netconf groups (RTNLGRP_IPV4_IFADDR 5, IPV6_IFADDR 9, IPV4_NETCONF 24, IPV6_NETCONF 25); its
  // port id is not the worker's pid (the worker's first netlink socket took that).
  const auto pids = d.served_by(2);
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] == pids[1]);
  CHECK(plumb::test::sh("awk '$2 == 0 && $4 == \"01800110\"' /proc/net/netlink").out.size() > 0);

  REQUIRE(plumb::test::sh("ip addr del 198.51.100.1/24 dev brwarm && sysctl -qw net.ipv4.ip_forward=0").exit_code == 0);
  add("p3");
  CHECK(d.served_by(3).back() == pids[0]);
  CHECK(plumb::test::sh("ip -4 -o addr show dev brwarm").out.find("inet 198.51.100.1/24") != std::string::npos);
  CHECK(plumb::test::sh("sysctl -n net.ipv4.ip_forward").out == "1\n");
}
