// tc qdisc look-ups (engine/kernel/tc.cpp) against the real kernel in a private node namespace:
// one RTM_GETQDISC for one device's qdisc, whatever else the node holds.
#include <doctest/doctest.h>

#include "engine/kernel/link.hpp"
#include "engine/kernel/tc.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

TEST_CASE("ingress_qdisc and root_qdisc report one device's qdiscs: none, clsact or ingress, a root qdisc, a missing device") {
  test::Node node;
  auto nl = netlink::Socket::open();
  REQUIRE_OK(nl);
  REQUIRE(test::sh("ip link add qa type veth peer name qb && ip link add qc type veth peer name qd").exit_code == 0);
  const int qa = (*link::get(*nl, std::string("qa")))->index;
  const int qc = (*link::get(*nl, std::string("qc")))->index;
  auto kind = [&](Result<std::string> r) {
    REQUIRE_OK(r);
    return *r;
  };
  CHECK(kind(tc::ingress_qdisc(*nl, qa)).empty());  // never had one
  CHECK(kind(tc::root_qdisc(*nl, qa)).empty());     // noqueue, built in: not reported
  REQUIRE(test::sh("tc qdisc add dev qc ingress && tc qdisc add dev qa clsact && tc qdisc add dev qa root pfifo").exit_code == 0);
  CHECK(kind(tc::ingress_qdisc(*nl, qa)) == "clsact");
  CHECK(kind(tc::ingress_qdisc(*nl, qc)) == "ingress");  // another device's qdisc is not qa's
  CHECK(kind(tc::root_qdisc(*nl, qa)) == "pfifo");
  REQUIRE(test::sh("tc qdisc del dev qa clsact").exit_code == 0);
  CHECK(kind(tc::ingress_qdisc(*nl, qa)).empty());  // removed
  CHECK(kind(tc::ingress_qdisc(*nl, 999999)).empty());  // no such device
}
