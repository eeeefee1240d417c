// What nft::add_port_mappings (engine/nft/portmap.cpp) sends to the kernel, counted through the
// netlink layer's sequence numbers (every request takes one, every batch a range of
// Batch::max_messages + 2), against the real kernel in a private node namespace per case.
#include <doctest/doctest.h>

// netinet/in.h before the linux/ headers: glibc then keeps linux/in.h from redefining it.
// clang-format off
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/netfilter.h>
#include <linux/netlink.h>
// clang-format on

#include "engine/netlink/socket.hpp"
#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace {

nft::PodPortMappings pod(const std::string& id, uint16_t host_port, const char* ip) {
  nft::PodPortMappings pm;
  pm.container_id = id;
  pm.ifname = "eth0";
  pm.mappings.push_back({IPPROTO_TCP, std::nullopt, host_port, *IpAddr::parse(ip), 80, {}});
  return pm;
}

/// The next sequence number of this thread's nfnetlink socket (the one nfnl::Session uses);
/// taking it consumes one.
uint32_t next_seq() {
  auto s = netlink::shared(NETLINK_NETFILTER);
  REQUIRE(s.has_value());
  return (*s)->reserve_seq(1);
}

/// Sequence numbers one nfnetlink batch of the default size takes.
constexpr uint32_t kBatchSeqs = netlink::Batch::max_messages(netlink::Batch::kDefaultLimit) + 2;

}  // namespace

TEST_CASE("add_port_mappings on an installed table: one transaction per pod, the marker chain is not read") {
  test::Node node;
  REQUIRE(nft::add_port_mappings(pod("c1", 8080, "192.0.2.2")).has_value());  // installs the objects
  const uint32_t before = next_seq();
  REQUIRE(nft::add_port_mappings(pod("c2", 8081, "192.0.2.3")).has_value());
  // The elements' batch only (and next_seq's own number): no GETCHAIN of portmap-dnat.
  CHECK(next_seq() - before == kBatchSeqs + 1);
  auto found = nft::find_port_mapping(AF_INET, IPPROTO_TCP, std::nullopt, 8081);
  REQUIRE(found.has_value());
  REQUIRE(found->has_value());
  CHECK((*found)->owner == "c2/eth0");
  // A host port already taken is still a conflict naming its owner, on the same path.
  auto taken = nft::add_port_mappings(pod("c3", 8081, "192.0.2.4"));
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().cni_code == cni_code::kConflict);
  CHECK(taken.error().text().find("c2") != std::string::npos);
}

TEST_CASE("add_port_mappings without the table: the elements' failure installs the objects, then they are added") {
  test::Node node;
  auto s = nft::nfnl::Session::open();
  REQUIRE(s.has_value());
  REQUIRE(nft::add_port_mappings(pod("c1", 8080, "192.0.2.2")).has_value());
  // The table removed behind plumb's back.
  REQUIRE(test::sh("nft delete table inet " + std::string(nft::kTableName)).exit_code == 0);
  REQUIRE(nft::add_port_mappings(pod("c2", 8081, "192.0.2.3")).has_value());
  auto chain = s->has_chain(NFPROTO_INET, nft::kTableName, nft::pmobj::kChainDnat);
  REQUIRE(chain.has_value());
  CHECK(*chain);
  auto found = nft::find_port_mapping(AF_INET, IPPROTO_TCP, std::nullopt, 8081);
  REQUIRE(found.has_value());
  REQUIRE(found->has_value());
  CHECK((*found)->owner == "c2/eth0");
}
