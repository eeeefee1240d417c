// The cluster IPAM's Kubernetes datastore under concurrency, against the API test server
// (tests/support/kube_api_test_server.py; one server for the file, cluster_kube_helpers.hpp):
// "nodes" are forked processes with their own API client and node name calling the IPAM library
// at once (tests/support/concurrent_nodes.hpp), on one IPPool and on node slices. Each case works
// in a Kubernetes namespace of its own. Addresses are never configured on any interface; the
// pools use 198.18.0.0/15 (RFC 2544, reserved for benchmarking) because no documentation range
// is bigger than a /24. The other Kubernetes datastore cases: cluster_kube_test.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/ipam/cluster_kube_helpers.hpp"
#include "tests/support/concurrent_nodes.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::test::cluster_kube;
namespace cl = plumb::ipam::cluster;
namespace wb = plumb::ipam::whereabouts;

namespace {

/// A node for NodeFleet: `count` ADDs as `node` in Kubernetes namespace `ns` (its own API client,
/// made after the start gun), containers "<node>-c<j>" of pods "<node>-p<j>"; each ADD reports
/// its API requests and lost writes.
NodePlan node_plan(const std::string& ipam_text, const std::string& node, const std::string& ns, int count) {
  NodePlan plan;
  plan.count = count;
  plan.container = [=](int j) { return node + "-c" + std::to_string(j); };
  plan.start = [=]() -> std::expected<NodeAddFn, std::string> {
    auto d = json::parse(ipam_text, "ipam");
    if (!d) return std::unexpected(d.error().text());
    auto cfg = cl::parse_config(*d);
    if (!cfg) return std::unexpected(cfg.error().text());
    std::shared_ptr<cl::KubeClusterIpam> ipam = cl::make_kube(std::move(*cfg), node, client(), ns);
    return [ipam, node](const std::string& cid, int j) -> NodeAddResult {
      auto r = ipam->add(request(cid, node + "-p" + std::to_string(j)));
      if (!r) return std::unexpected(r.error().text());
      NodeAdd out{{}, ipam->last_stats().requests, ipam->last_stats().conflicts};
      for (auto& ip : r->ips) out.addrs.push_back(ip.address.str());
      return out;
    };
  };
  return plan;
}

/// Every address handed out once, and the pool holding each for its container.
void check_unique(const NodeRun& run, const wb::IpPool& pool, size_t expect) {
  auto holder = plumb::test::check_unique_addresses(run, expect);
  CHECK(pool.allocations.size() == expect);
  size_t matched = 0;
  for (auto& [off, a] : pool.allocations) {
    auto it = holder.find(pool.at(off).str());
    if (it != holder.end() && it->second == a.id) ++matched;
  }
  CHECK(matched == expect);
}

}  // namespace

TEST_CASE("8 nodes allocate 2,000 addresses concurrently from one IPPool and none is given twice") {
  const std::string ns = "herd";
  // One /20 as the etcd case; no reservations: the pool's slot test is what is under test here
  // (reservations have their own cases, and would add a third request per ADD).
  const std::string text = R"({"type": "whereabouts", "range": "198.18.0.0/20", "enable_overlapping_ranges": false})";
  NodeFleet fleet;
  for (int i = 0; i < 8; ++i) {
    fleet.spawn(api().dir() + "/node-" + std::to_string(i) + ".out", node_plan(text, "node-" + std::to_string(i), ns, 250));
  }
  auto t0 = std::chrono::steady_clock::now();
  fleet.fire();
  NodeRun run = fleet.collect();
  MESSAGE("2,000 allocations by 8 node processes in ", seconds_since(t0), " s; ", run.requests, " requests, ",
          run.conflicts, " writes lost to another node");
  REQUIRE_MESSAGE(run.errors.empty(), run.errors.front());
  REQUIRE(run.by_container.size() == 2000);
  check_unique(run, pool_of(ns, "198.18.0.0-20"), 2000);
  CHECK(reservations(ns) == 0);
}

TEST_CASE("node slices: each node takes its own slice and allocates from its own IPPool; whereabouts' assignments hold") {
  const std::string ns = "slices";
  // whereabouts' node-slice controller assigned node-a the third /28.
  api().put("nodeslicepools", ns, "green", fixture("nodeslicepool.json"));
  const std::string green = R"({"type": "whereabouts", "range": "198.51.100.0/24", "node_slice_size": "/28"})";
  auto a = make(green, "node-a", ns);
  auto r = a->add(request("a0", "pa0", "net1", "green"));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->ips[0].address.len == 24);  // the network's prefix, not the slice's
  CHECK(IpPrefix::parse("198.51.100.32/28")->contains(r->ips[0].address.addr));
  CHECK_FALSE(api().get("ippools", ns, "node-a-198.51.100.32-28").empty());
  CHECK(a->last_stats().requests == 4);  // NodeSlicePool GET, IPPool GET (404) + POST, reservation POST
  // A node without a slice takes a free one itself (no controller needed); a missing
  // NodeSlicePool is created by the first node.
  const std::string red = R"({"type": "whereabouts", "range": "198.18.4.0/22", "node_slice_size": "/26",
                              "network_name": "red", "enable_overlapping_ranges": false})";
  NodeFleet fleet;
  for (int i = 0; i < 4; ++i) {
    fleet.spawn(api().dir() + "/slice-" + std::to_string(i) + ".out", node_plan(red, "node-" + std::to_string(i), ns, 30));
  }
  fleet.fire();
  NodeRun run = fleet.collect();
  REQUIRE_MESSAGE(run.errors.empty(), run.errors.front());
  auto nsp = wb::decode_slice_pool(doc(api().get("nodeslicepools", ns, "red")), "red");
  REQUIRE(nsp.has_value());
  std::map<std::string, std::string> slice_of;
  for (auto& [node, range] : nsp->allocations) {
    if (node.empty()) continue;
    CHECK_MESSAGE(!slice_of.contains(node), node, " holds two slices");
    slice_of[node] = range;
  }
  REQUIRE(slice_of.size() == 4);
  std::set<std::string> distinct;
  for (auto& [node, range] : slice_of) distinct.insert(range);
  CHECK(distinct.size() == 4);
  for (auto& [cid, addrs] : run.by_container) {
    std::string node = cid.substr(0, cid.find("-c"));
    auto slice = IpPrefix::parse(slice_of[node]);
    REQUIRE(slice.has_value());
    for (auto& addr : addrs) {
      CHECK_MESSAGE(slice->contains(IpPrefix::parse(addr)->addr), addr, " of ", cid, " is outside ", slice_of[node]);
    }
  }
  CHECK(run.by_container.size() == 120);
  CHECK(run.conflicts <= 6);  // only the slice assignments can race; allocations never do
  for (auto& [node, range] : slice_of) {
    auto pool = pool_of(ns, "red-" + node + "-" + wb::normalize_range(*IpPrefix::parse(range)));
    CHECK(pool.allocations.size() == 30);
  }
}
