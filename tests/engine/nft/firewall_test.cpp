// The firewall's bridge isolation claims (engine/nft/firewall.cpp) under concurrency: an
// attachment isolating a bridge while another attachment's claim on it is released (a second
// pod's ADD during the first's DEL) keeps its isolation, wherever in the release it lands. The
// rest of the firewall is tested end to end in tests/drivers/firewall_test.cpp.
#include "engine/nft/firewall.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "engine/nft/portmap.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace {

/// `nft list set inet plumb <name>` as text ("" when the set does not exist).
std::string set_text(const std::string& name) {
  return test::sh("nft list set inet plumb " + name + " 2>/dev/null").out;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE(
    "ingressPolicy isolated: a bridge isolated for a second attachment while the first's claim is released stays "
    "isolated for the second") {
  test::Node node;
  const std::string br = "br-iso";
  const std::string first = nft::owner_tag("ctr-1", "net1"), second = nft::owner_tag("ctr-2", "net1");
  // The second attachment's isolation starts a little later each round, so across the rounds it
  // lands before, inside and after every read and deletion of the release.
  for (int round = 0; round < 120; ++round) {
    CAPTURE(round);
    REQUIRE(nft::firewall_isolate_bridge(br, true, first));
    std::atomic<bool> go{false};
    Status released, isolated;
    std::thread del([&] {
      while (!go.load()) std::this_thread::yield();
      released = nft::firewall_release_bridge(br, true, first);
    });
    std::thread add([&] {
      while (!go.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(25 * (round % 40)));
      isolated = nft::firewall_isolate_bridge(br, true, second);
    });
    go.store(true);
    del.join();
    add.join();
    REQUIRE_MESSAGE(released, released.error().text());
    REQUIRE_MESSAGE(isolated, isolated.error().text());

    // The second's isolation whole: the bridge, its pair, its isolated pair; its claims only.
    const std::string bridges = set_text("firewall-bridges"), pairs = set_text("firewall-bridge-pairs"),
                      isolated_pairs = set_text("firewall-isolated-pairs"), owners = set_text("firewall-bridge-owners"),
                      isolated_owners = set_text("firewall-isolated-owners");
    INFO(bridges, pairs, isolated_pairs, owners, isolated_owners);
    REQUIRE(has(bridges, br));
    REQUIRE(has(pairs, br));
    REQUIRE(has(isolated_pairs, br));
    CHECK(has(owners, second));
    CHECK(has(isolated_owners, second));
    CHECK_FALSE(has(owners, first));
    CHECK_FALSE(has(isolated_owners, first));

    // The second's DEL: nothing of the bridge left for the next round.
    REQUIRE(nft::firewall_release_bridge(br, true, second));
    CHECK_FALSE(has(set_text("firewall-bridges"), br));
    CHECK_FALSE(has(set_text("firewall-isolated-pairs"), br));
  }
}
