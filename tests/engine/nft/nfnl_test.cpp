// nfnl::Session's reads that spare the "ensure" transactions (engine/nft/nfnl.cpp): has_chain and
// has_set against the real kernel, in a private node namespace per case.
#include <doctest/doctest.h>

// netinet/in.h before the linux/ headers: glibc then keeps linux/in.h from redefining it.
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/netfilter.h>

#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

TEST_CASE("has_chain and has_set: false without the table or the object, true once port mappings installed them") {
  test::Node node;
  auto s = nft::nfnl::Session::open();
  REQUIRE(s.has_value());
  auto chain = s->has_chain(NFPROTO_INET, nft::kTableName, nft::pmobj::kChainDnat);
  REQUIRE(chain.has_value());
  CHECK_FALSE(*chain);  // no table yet
  nft::PodPortMappings pm;
  pm.container_id = "c1";
  pm.ifname = "eth0";
  pm.mappings.push_back({IPPROTO_TCP, std::nullopt, 8080, *IpAddr::parse("192.0.2.2"), 80, {}});
  REQUIRE(nft::add_port_mappings(pm).has_value());
  chain = s->has_chain(NFPROTO_INET, nft::kTableName, nft::pmobj::kChainDnat);
  REQUIRE(chain.has_value());
  CHECK(*chain);
  auto set = s->has_set(NFPROTO_INET, nft::kTableName, nft::pmobj::kOwners);
  REQUIRE(set.has_value());
  CHECK(*set);
  auto other = s->has_chain(NFPROTO_INET, nft::kTableName, "no-such-chain");
  REQUIRE(other.has_value());
  CHECK_FALSE(*other);
  auto bridge = s->has_chain(NFPROTO_BRIDGE, nft::kTableName, nft::pmobj::kChainDnat);  // the inet table only
  REQUIRE(bridge.has_value());
  CHECK_FALSE(*bridge);
  // A second pod's mappings go to the objects in place (one transaction: portmap_test counts it).
  pm.container_id = "c2";
  pm.mappings[0].host_port = 8081;
  pm.mappings[0].pod_ip = *IpAddr::parse("192.0.2.3");
  REQUIRE(nft::add_port_mappings(pm).has_value());
  auto found = nft::find_port_mapping(AF_INET, IPPROTO_TCP, std::nullopt, 8081);
  REQUIRE(found.has_value());
  REQUIRE(found->has_value());
  CHECK((*found)->owner == "c2/eth0");
}
