// Cluster-wide IPAM against a real etcd under concurrency (Debian's etcd-server, started per case
// on loopback ports of the case's private node namespace, never 2379, stopped by pid): "nodes"
// are forked processes with their own node names calling the IPAM library at once
// (tests/support/concurrent_nodes.hpp), and no address may be given twice, even while the
// cluster's leader is killed. Addresses are never configured on any interface; the pools use
// 198.18.0.0/15 (RFC 2544, reserved for benchmarking) because no documentation range is bigger
// than a /24. The other etcd cases: cluster_etcd_test.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/ipam/cluster_etcd_helpers.hpp"
#include "tests/support/concurrent_nodes.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::test::cluster_etcd;
namespace cl = plumb::ipam::cluster;

namespace {

/// A simulated node for NodeFleet: `count` ADDs as `node` (its own etcd client, made after the
/// start gun) for containers "<cid_prefix><node>-c<j>".
NodePlan node_plan(const std::string& ipam_text, const std::string& node, int count, const std::string& cid_prefix = "") {
  NodePlan plan;
  plan.count = count;
  plan.container = [=](int j) { return cid_prefix + node + "-c" + std::to_string(j); };
  plan.start = [=]() -> std::expected<NodeAddFn, std::string> {
    auto d = json::parse(ipam_text, "ipam");
    if (!d) return std::unexpected(d.error().text());
    auto made = cl::make(*d, node);
    if (!made) return std::unexpected(made.error().text());
    std::shared_ptr<cl::ClusterIpam> ipam = std::move(*made);
    return [ipam](const std::string& cid, int) -> NodeAddResult {
      auto r = ipam->add(request(cid));
      if (!r) return std::unexpected(r.error().text());
      return NodeAdd{addrs_of(*r)};
    };
  };
  return plan;
}

/// Asserts that every address given appears once in the results and once in etcd, held there by
/// the container that got it, with an owner key per container.
void check_unique(ipam::etcd::Client& c, const NodeRun& run, size_t expect, const std::string& pool = "_default") {
  auto holder = plumb::test::check_unique_addresses(run, expect);
  auto keys = keys_under(c, cl::ip_prefix(pool));
  CHECK(keys.size() == expect);
  size_t matched = 0;
  for (auto& [key, value] : keys) {
    auto v = doc(value);
    auto it = holder.find(key_addr(key));
    if (it != holder.end() && it->second == v["containerID"].GetString()) ++matched;
  }
  CHECK(matched == expect);
  CHECK(keys_under(c, cl::owner_prefix(pool)).size() == run.by_container.size());
}

}  // namespace

TEST_CASE("8 nodes allocate 2,000 addresses concurrently from one /20 and none is given twice") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  const std::string text = ipam_json(R"("range": "198.18.0.0/20")", etcd_.endpoints_json());
  NodeFleet fleet;
  for (int i = 0; i < 8; ++i) {
    fleet.spawn(node.dir() + "/node-" + std::to_string(i) + ".out", node_plan(text, "node-" + std::to_string(i), 250));
  }
  auto t0 = std::chrono::steady_clock::now();
  fleet.fire();
  NodeRun run = fleet.collect();
  MESSAGE("2,000 allocations by 8 node processes in ", seconds_since(t0), " s");
  REQUIRE_MESSAGE(run.errors.empty(), run.errors.front());
  REQUIRE(run.by_container.size() == 2000);
  auto c = inspector(etcd_);
  check_unique(c, run, 2000);
  for (auto& [cid, addrs] : run.by_container) {
    REQUIRE(addrs.size() == 1);
    auto p = IpPrefix::parse(addrs[0]);
    REQUIRE(p.has_value());
    CHECK(p->len == 20);
    CHECK(IpPrefix::parse("198.18.0.0/20")->contains(p->addr));
  }
  // Owner keys name the node that allocated.
  auto owners = keys_under(c, cl::owner_prefix("_default"));
  std::map<std::string, int> per_node;
  for (auto& [k, v] : owners) per_node[doc(v)["node"].GetString()]++;
  CHECK(per_node.size() == 8);
  for (auto& [n, count] : per_node) CHECK_MESSAGE(count == 250, n);
}

TEST_CASE("worst-case herd: 6 processes sharing one node name (same start, same cursor) all succeed, none twice") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  const std::string text = ipam_json(R"("range": "198.18.32.0/22")", etcd_.endpoints_json());
  NodeFleet fleet;
  for (int i = 0; i < 6; ++i) {
    // One node name: the same hash start and cursor key, so every claim races the others.
    fleet.spawn(node.dir() + "/herd-" + std::to_string(i) + ".out", node_plan(text, "herd", 100, "p" + std::to_string(i) + "-"));
  }
  fleet.fire();
  NodeRun run = fleet.collect();
  REQUIRE_MESSAGE(run.errors.empty(), run.errors.front());
  auto c = inspector(etcd_);
  check_unique(c, run, 600);
}

TEST_CASE("3-member cluster: the leader is killed mid-run and allocations continue") {
  Node node;
  EtcdCluster etcd_(3, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0), etcd_.log(1), etcd_.log(2));
  auto urls = etcd_.client_urls();
  NodeFleet fleet;
  for (int i = 0; i < 4; ++i) {
    // Each node lists the members starting at a different one, as nodes of a cluster would.
    std::string eps = "[";
    for (int k = 0; k < 3; ++k) eps += (k ? ", \"" : "\"") + urls[static_cast<size_t>((i + k) % 3)] + "\"";
    eps += "]";
    fleet.spawn(node.dir() + "/node-" + std::to_string(i) + ".out",
                node_plan(ipam_json(R"("range": "198.18.16.0/20")", eps), "node-" + std::to_string(i), 150));
  }
  fleet.fire();
  // Let them get going, then kill the leader.
  auto c = inspector(etcd_);
  auto t0 = std::chrono::steady_clock::now();
  size_t before = 0;
  while (seconds_since(t0) < 60) {
    before = keys_under(c, cl::ip_prefix("_default")).size();
    if (before >= 100) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int leader = etcd_.leader();
  REQUIRE(leader >= 0);
  etcd_.kill(leader);
  MESSAGE("killed leader m", leader, " after ", before, " allocations");
  NodeRun run = fleet.collect();
  REQUIRE_MESSAGE(run.errors.empty(), run.errors.front());
  CHECK(before < 600);  // the kill happened mid-run
  check_unique(c, run, 600);
}
