// The invocation's kernel handles (cni-entry/pod/attach.cpp open_kernel), in a private node
// namespace: the node socket is the thread's shared one, so a daemon worker's invocations do not
// each open and close an rtnetlink socket; the node's own namespace is never taken as a pod's.
#include "cni-entry/pod/attach.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/netlink.h>

#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
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
