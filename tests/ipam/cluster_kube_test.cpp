// The cluster IPAM's Kubernetes datastore against the API test server
// (tests/support/kube_api_test_server.py: TLS, JSON patches with "test", 409/422, faults), one
// server for the whole file on the loopback of the test executable's private network namespace
// (cluster_kube_helpers.hpp; only the last case builds a Node: the real plumb binary with a pod
// namespace). Each case works in a Kubernetes namespace of its own. Addresses are never
// configured on any interface. Concurrent nodes (forked processes with their own API client and
// node name): cluster_kube_concurrency_test.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "tests/ipam/cluster_kube_helpers.hpp"
#include "tests/support/concurrent_nodes.hpp"
#include "tests/support/kube_cluster.hpp"

using namespace plumb;
using namespace plumb::test::cluster_kube;
namespace cl = plumb::ipam::cluster;
namespace wb = plumb::ipam::whereabouts;
using plumb::test::seconds_since;

TEST_CASE("object names and offsets are whereabouts' own") {
  auto v4 = *IpPrefix::parse("192.0.2.0/24");
  auto v6 = *IpPrefix::parse("2001:db8::/64");
  CHECK(wb::pool_name("", "", v4) == "192.0.2.0-24");
  CHECK(wb::pool_name("blue", "", v4) == "blue-192.0.2.0-24");
  CHECK(wb::pool_name("blue", "node-a", *IpPrefix::parse("198.51.100.32/28")) == "blue-node-a-198.51.100.32-28");
  CHECK(wb::pool_name("", "node-a", *IpPrefix::parse("198.51.100.32/28")) == "node-a-198.51.100.32-28");
  CHECK(wb::pool_name("", "", v6) == "2001-db8---64");
  CHECK(wb::pool_name("", "", *IpPrefix::parse("2001:db8::ab00/120")) == "2001-db8--ab00-120");
  CHECK(wb::cidr_text(*IpPrefix::parse("192.0.2.77/24")) == "192.0.2.0/24");  // host bits dropped, as Go's IPNet
  CHECK(wb::reservation_name(*IpAddr::parse("192.0.2.5"), "") == "192.0.2.5");
  CHECK(wb::reservation_name(*IpAddr::parse("192.0.2.5"), "blue") == "blue-192.0.2.5");
  CHECK(wb::reservation_name(*IpAddr::parse("2001:db8::"), "") == "2001-db8--0");  // a trailing ':' gets a 0
  CHECK(wb::reservation_name(*IpAddr::parse("2001:db8::7"), "blue") == "blue-2001-db8--7");
  // Offsets count from spec.range's address as written (host bits kept, as net.ParseCIDR's IP).
  auto p = wb::decode_pool(doc(R"({"spec": {"range": "192.0.2.4/24", "allocations": {"3": {"id": "x", "podref": "a/b"},
                                    "not-a-number": {"id": "y", "podref": "a/c"}}}})"),
                           "pool");
  REQUIRE(p.has_value());
  REQUIRE(p->allocations.size() == 1);
  CHECK(p->at(3).str() == "192.0.2.7");
  // Slices: every /28 of a /24, in order; a slice size outside the range is refused.
  auto s = wb::divide(v4, 28);
  REQUIRE(s.has_value());
  REQUIRE(s->size() == 16);
  CHECK((*s)[2].str() == "192.0.2.32/28");
  CHECK(wb::parse_slice_size("/28", v4).value_or(0) == 28);
  CHECK(wb::parse_slice_size("28", v4).value_or(0) == 28);
  CHECK_FALSE(wb::parse_slice_size("/20", v4).has_value());
  CHECK_FALSE(wb::parse_slice_size("x", v4).has_value());
  CHECK_FALSE(wb::divide(*IpPrefix::parse("198.18.0.0/8"), 28).has_value());  // 2^20 slices
}

TEST_CASE("config: no etcd key means the Kubernetes datastore; whereabouts' keys are read, leader_* accepted") {
  auto c = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue",
      "leader_lease_duration": 1500, "leader_renew_deadline": 1000, "leader_retry_period": 500,
      "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"}, "log_level": "debug"})"));
  REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error().text()));
  CHECK(c->datastore == cl::Datastore::Kubernetes);
  CHECK(c->overlapping_ranges);  // whereabouts' default
  CHECK(c->network_name == "blue");
  CHECK(c->kubeconfig == "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig");
  auto e = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "etcd_host": "127.0.0.1:2379"})"));
  REQUIRE(e.has_value());
  CHECK(e->datastore == cl::Datastore::Etcd);
  auto k = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "etcd_host": "127.0.0.1:2379",
      "datastore": "kubernetes", "enable_overlapping_ranges": false})"));
  REQUIRE(k.has_value());
  CHECK(k->datastore == cl::Datastore::Kubernetes);
  CHECK_FALSE(k->overlapping_ranges);
  auto bad = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "node_slice_size": "/20"})"));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().cni_code == cni_code::kInvalidConfig);
  CHECK(bad.error().msg.find("ipam.node_slice_size \"/20\"") != std::string::npos);
  auto two = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "node_slice_size": "/28",
      "ipRanges": [{"range": "2001:db8::/64"}]})"));
  REQUIRE_FALSE(two.has_value());
  CHECK(two.error().msg.find("exactly one range") != std::string::npos);
  auto etcd = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "datastore": "etcd"})"));
  REQUIRE_FALSE(etcd.has_value());
  CHECK(etcd.error().msg.find("etcd_host") != std::string::npos);
  // Without plumb's credentials and without kubernetes.kubeconfig there is nothing to reach.
  auto none = cl::make_kube(*cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24"})")), "n", nullptr);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().cni_code == cni_code::kInvalidConfig);
  CHECK(none.error().msg.find("no API credentials") != std::string::npos);
}

TEST_CASE("whereabouts' pool is read and extended in its own format; its allocations are released by plumb's DEL") {
  const std::string ns = "golden";
  api().put("ippools", ns, "blue-192.0.2.0-24", fixture("ippool.json"));
  api().put("overlappingrangeipreservations", ns, "blue-192.0.2.1", fixture("reservation.json"));
  const std::string text = R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue"})";
  auto ipam = make(text, "node-a", ns);
  auto req = request("plumb-c1", "plumb-pod");
  const auto wanted = doc(R"({"ips": ["192.0.2.200"]})");  // runtimeConfig.ips (CNI_ARGS IP= is whereabouts' static address)
  req.runtime_config = &wanted;
  CHECK(add_ok(*ipam, req) == "192.0.2.200/24");
  // Exactly whereabouts' shape: the golden allocations untouched, the new one keyed by its offset.
  CHECK(stored_equals("ippools", ns, "blue-192.0.2.0-24", "spec", "ippool-extended.json"));
  CHECK(stored_equals("overlappingrangeipreservations", ns, "blue-192.0.2.200", "spec", "reservation-plumb.json"));
  // An address whereabouts holds is refused, naming its holder.
  auto taken = request("plumb-c2", "other");
  const auto held = doc(R"({"ips": ["192.0.2.9"]})");
  taken.runtime_config = &held;
  auto r = ipam->add(taken);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kIpamExhausted);
  CHECK(r.error().msg.find("team-a/db-1") != std::string::npos);
  // A free address is never one whereabouts holds.
  std::string free_addr = add_ok(*ipam, request("plumb-c3", "free"));
  CHECK(free_addr != "192.0.2.1/24");
  CHECK(free_addr != "192.0.2.2/24");
  CHECK(free_addr != "192.0.2.9/24");
  // DEL of pods whereabouts set up: web-0 (with ifname) and legacy-0 (an old entry without one).
  auto del_web = request("9b3e2f8a1c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f", "web-0");
  REQUIRE(ipam->del(del_web).has_value());
  auto del_legacy = request("1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988", "legacy-0");
  REQUIRE(ipam->del(del_legacy).has_value());
  auto pool = pool_of(ns, "blue-192.0.2.0-24");
  CHECK_FALSE(pool.allocations.contains(1));
  CHECK_FALSE(pool.allocations.contains(2));
  CHECK(pool.allocations.contains(9));  // team-a/db-1 is not ours to touch
  // whereabouts' reservation (no containerid) went with its pod's DEL.
  CHECK(api().get("overlappingrangeipreservations", ns, "blue-192.0.2.1").empty());
  // A repeated ADD returns what the container holds; a repeated DEL is a no-op.
  CHECK(add_ok(*ipam, request("plumb-c1", "plumb-pod")) == "192.0.2.200/24");
  REQUIRE(ipam->del(request("plumb-c1", "plumb-pod")).has_value());
  REQUIRE(ipam->del(request("plumb-c1", "plumb-pod")).has_value());
  CHECK(api().get("overlappingrangeipreservations", ns, "blue-192.0.2.200").empty());
  CHECK(ipam->check(request("plumb-c3", "free"), cni::CniResult{}).has_value());
  CHECK_FALSE(ipam->check(request("plumb-c1", "plumb-pod"), cni::CniResult{}).has_value());
}

TEST_CASE("API requests per ADD: one read and one write, plus the reservation with overlapping ranges") {
  const std::string ns = "cost";
  auto plain = make(R"({"type": "whereabouts", "range": "192.0.2.0/24", "enable_overlapping_ranges": false})", "node-a", ns);
  auto first = plain->add(request("c0", "p0"));  // creates the pool, holding the allocation: 1 GET (404) + 1 POST
  REQUIRE(first.has_value());
  CHECK(plain->last_stats().requests == 2);
  api().clear_requests();
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(plain->add(request("c" + std::to_string(i), "p" + std::to_string(i))).has_value());
    CHECK(plain->last_stats().requests == 2);
  }
  const std::string pool_path = "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/cost/ippools/192.0.2.0-24";
  CHECK(api().count("GET", pool_path, "200") == 5);
  CHECK(api().count("PATCH", pool_path, "200") == 5);
  CHECK(api().requests().size() == 10);
  auto over = make(R"({"type": "whereabouts", "range": "198.51.100.0/24"})", "node-a", ns);
  REQUIRE(over->add(request("o0", "q0")).has_value());
  REQUIRE(over->add(request("o1", "q1")).has_value());
  CHECK(over->last_stats().requests == 3);  // GET + PATCH + POST of the reservation
  REQUIRE(over->del(request("o1", "q1")).has_value());
  CHECK(over->last_stats().requests == 4);  // GET + PATCH, GET + DELETE of the reservation
}

TEST_CASE("overlapping ranges across two NADs: an address one holds is never handed out by the other") {
  const std::string ns = "overlap";
  auto wide = make(R"({"type": "whereabouts", "range": "192.0.2.0/24"})", "node-a", ns);
  auto narrow = make(R"({"type": "whereabouts", "range": "192.0.2.0/28"})", "node-b", ns);
  std::set<std::string> wide_got;
  for (int i = 1; i <= 7; ++i) {
    auto req = request("w" + std::to_string(i), "wp" + std::to_string(i));
    const auto wanted = doc(R"({"ips": ["192.0.2.)" + std::to_string(i) + R"("]})");
    req.runtime_config = &wanted;
    wide_got.insert(add_ok(*wide, req).substr(0, 10));
  }
  std::set<std::string> narrow_got;
  for (int i = 1; i <= 7; ++i) {
    std::string a = add_ok(*narrow, request("n" + std::to_string(i), "np" + std::to_string(i)));
    CHECK(IpPrefix::parse(a)->len == 28);
    std::string bare = a.substr(0, a.find('/'));
    CHECK_MESSAGE(!wide_got.contains(bare), bare, " is held through the other NAD");
    narrow_got.insert(bare);
  }
  CHECK(narrow_got.size() == 7);  // exactly 192.0.2.8 - .14
  auto full = narrow->add(request("n8", "np8"));
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().cni_code == cni_code::kIpamExhausted);
  CHECK(pool_of(ns, "192.0.2.0-28").allocations.size() == 7);  // the failed ADD holds nothing
  CHECK(reservations(ns) == 14);
}

TEST_CASE("dual stack: one address per range or none; an exhausted IPv6 range leaves no IPv4 address held") {
  const std::string ns = "dual";
  auto ipam = make(R"({"type": "whereabouts", "ipRanges": [{"range": "192.0.2.0/24"}, {"range": "2001:db8::/126"}]})",
                   "node-a", ns);
  auto r = ipam->add(request("d1", "dp1"));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 2);
  CHECK(r->ips[1].address.len == 126);
  REQUIRE(ipam->add(request("d2", "dp2")).has_value());
  REQUIRE(ipam->add(request("d3", "dp3")).has_value());  // the /126 hands out ::1 to ::3 (whereabouts: not ::3)
  auto full = ipam->add(request("d4", "dp4"));
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().cni_code == cni_code::kIpamExhausted);
  CHECK(full.error().msg.find("2001:db8::/126") != std::string::npos);
  CHECK(pool_of(ns, "192.0.2.0-24").allocations.size() == 3);
  CHECK(reservations(ns) == 6);
  REQUIRE(ipam->del(request("d1", "dp1")).has_value());
  CHECK(pool_of(ns, "192.0.2.0-24").allocations.size() == 2);
  CHECK(pool_of(ns, "2001-db8---126").allocations.size() == 2);
}

TEST_CASE("409 storms, delays and failed writes during ADD end in bounded time with nothing half-held") {
  const std::string ns = "faults";
  const std::string pool_path = "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/faults/ippools/192.0.2.0-24";
  auto ipam = make(R"({"type": "whereabouts", "range": "192.0.2.0/24"})", "node-a", ns, client(std::chrono::milliseconds(800), 1));
  REQUIRE(ipam->add(request("f0", "fp0")).has_value());  // the pool exists
  auto holds_f1 = [&] {
    for (auto& [off, a] : pool_of(ns, "192.0.2.0-24").allocations) {
      if (a.id == "f1") return true;
    }
    return false;
  };

  SUBCASE("a storm of 409s that ends: the ADD goes through") {
    api().set_faults(R"([{"match": "^PATCH .*/ippools/", "action": "fail", "code": 409, "times": 5}])");
    REQUIRE(ipam->add(request("f1", "fp1")).has_value());
    CHECK(ipam->last_stats().conflicts == 5);
    CHECK(holds_f1());
  }
  SUBCASE("409s without end: code 11 after a bounded number of writes, nothing held") {
    api().set_faults(R"([{"match": "^PATCH .*/ippools/", "action": "fail", "code": 409}])");
    api().clear_requests();
    auto r = ipam->add(request("f1", "fp1"));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kTryAgainLater);
    CHECK(api().count("PATCH", pool_path) == 24);
    CHECK_FALSE(holds_f1());
  }
  SUBCASE("an API server slower than the timeout: code 11, nothing held") {
    api().set_faults(R"([{"match": "^GET .*/ippools/", "action": "delay", "seconds": 1.5}])");
    auto t0 = std::chrono::steady_clock::now();
    auto r = ipam->add(request("f1", "fp1"));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kTryAgainLater);
    CHECK(seconds_since(t0) < 10);
    api().set_faults("[]");
    CHECK_FALSE(holds_f1());
  }
  SUBCASE("the reservation cannot be written: the pool's slot is given back") {
    api().set_faults(R"([{"match": "^POST .*/overlappingrangeipreservations", "action": "fail", "code": 503}])");
    auto r = ipam->add(request("f1", "fp1"));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kTryAgainLater);
    CHECK_FALSE(holds_f1());
  }
  api().set_faults("[]");
  REQUIRE(ipam->del(request("f1", "fp1")).has_value());
  CHECK(reservations(ns) == 1);  // f0's
}

TEST_CASE("409 storms and delays during DEL: bounded, and the allocation stays held until a DEL completes") {
  const std::string ns = "delfaults";
  const std::string pool_path = "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/delfaults/ippools/192.0.2.0-24";
  auto ipam = make(R"({"type": "whereabouts", "range": "192.0.2.0/24"})", "node-a", ns, client(std::chrono::milliseconds(800), 1));
  REQUIRE(ipam->add(request("d0", "dp0")).has_value());
  REQUIRE(ipam->add(request("d1", "dp1")).has_value());
  auto ids = [&] {
    std::set<std::string> out;
    for (auto& [off, a] : pool_of(ns, "192.0.2.0-24").allocations) out.insert(a.id);
    return out;
  };

  SUBCASE("a storm of 409s that ends: the DEL goes through") {
    api().set_faults(R"([{"match": "^PATCH .*/ippools/", "action": "fail", "code": 409, "times": 3}])");
    REQUIRE(ipam->del(request("d1", "dp1")).has_value());
    CHECK(ipam->last_stats().conflicts == 3);
  }
  SUBCASE("409s without end: code 11 after a bounded number of writes; the next DEL releases") {
    api().set_faults(R"([{"match": "^PATCH .*/ippools/", "action": "fail", "code": 409}])");
    api().clear_requests();
    auto r = ipam->del(request("d1", "dp1"));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kTryAgainLater);
    CHECK(api().count("PATCH", pool_path) == 8);
    CHECK(ids() == std::set<std::string>{"d0", "d1"});
    CHECK(reservations(ns) == 2);
  }
  SUBCASE("a pool read slower than the timeout: code 11; the next DEL releases") {
    api().set_faults(R"([{"match": "^GET .*/ippools/", "action": "delay", "seconds": 1.5}])");
    auto t0 = std::chrono::steady_clock::now();
    auto r = ipam->del(request("d1", "dp1"));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kTryAgainLater);
    CHECK(seconds_since(t0) < 10);
  }
  api().set_faults("[]");
  REQUIRE(ipam->del(request("d1", "dp1")).has_value());
  CHECK(ids() == std::set<std::string>{"d0"});
  CHECK(reservations(ns) == 1);  // d0's
}

TEST_CASE("an API server outage: ADD and DEL fail with code 11; the next DEL completes the release") {
  const std::string ns = "outage";
  const std::string text = R"({"type": "whereabouts", "range": "192.0.2.0/24"})";
  auto ipam = make(text, "node-a", ns, client(std::chrono::milliseconds(800), 1));
  REQUIRE(ipam->add(request("o0", "op0")).has_value());
  api().stop();
  auto down = ipam->del(request("o0", "op0"));
  REQUIRE_FALSE(down.has_value());
  CHECK(down.error().cni_code == cni_code::kTryAgainLater);
  auto down_add = ipam->add(request("o1", "op1"));
  REQUIRE_FALSE(down_add.has_value());
  CHECK(down_add.error().cni_code == cni_code::kTryAgainLater);
  api().restart();
  REQUIRE(make(text, "node-a", ns)->del(request("o0", "op0")).has_value());
  CHECK(pool_of(ns, "192.0.2.0-24").allocations.empty());
  CHECK(reservations(ns) == 0);
}

TEST_CASE("IPAMClaim owner: the same address from any node, kept through pod DELs, released with the claim") {
  const std::string ns = "claims";
  const std::string text = R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "vm"})";
  auto node_a = make(text, "node-a", ns);
  auto node_b = make(text, "node-b", ns);
  auto on_a = request("pod-on-a", "virt-launcher-vm1-a");
  on_a.owner = "ipamclaim:default/vm1.vm";
  std::string addr = add_ok(*node_a, on_a);
  auto held = pool_of(ns, "vm-192.0.2.0-24");
  REQUIRE(held.allocations.size() == 1);
  CHECK(held.allocations.begin()->second == wb::Allocation{"ipamclaim:default/vm1.vm", "", "claim"});
  REQUIRE(node_a->del(request("pod-on-a", "virt-launcher-vm1-a")).has_value());  // the pod's DEL leaves it
  CHECK(pool_of(ns, "vm-192.0.2.0-24").allocations.size() == 1);
  auto on_b = request("pod-on-b", "virt-launcher-vm1-b");
  on_b.owner = "ipamclaim:default/vm1.vm";
  on_b.owner_ips = {addr};
  CHECK(add_ok(*node_b, on_b) == addr);
  CHECK(pool_of(ns, "vm-192.0.2.0-24").allocations.size() == 1);
  auto release = request("", "");
  release.container_id = "ipamclaim:default/vm1.vm";
  release.owner = "ipamclaim:default/vm1.vm";
  REQUIRE(node_b->del(release).has_value());
  CHECK(pool_of(ns, "vm-192.0.2.0-24").allocations.empty());
  CHECK(reservations(ns) == 0);
}

TEST_CASE("GC on a node-slice pool releases this node's allocations GC does not keep; claims and kept ones stay") {
  const std::string ns = "gc";
  const std::string text = R"({"type": "whereabouts", "range": "198.51.100.0/24", "node_slice_size": "/27", "network_name": "gcnet"})";
  auto ipam = make(text, "node-a", ns);
  add_ok(*ipam, request("live", "p-live"));
  add_ok(*ipam, request("dead", "p-dead"));
  auto claimed = request("x", "p-vm");
  claimed.owner = "ipamclaim:default/vm";
  add_ok(*ipam, claimed);
  auto st = ipam->gc(request("", ""), [](const std::string& cid, const std::string&) { return cid == "live"; });
  REQUIRE_MESSAGE(st.has_value(), (st ? "" : st.error().text()));
  std::set<std::string> left;
  auto nsp = wb::decode_slice_pool(doc(api().get("nodeslicepools", ns, "gcnet")), "gcnet");
  REQUIRE(nsp.has_value());
  for (auto& [node, range] : nsp->allocations) {
    if (node != "node-a") continue;
    for (auto& [off, a] : pool_of(ns, "gcnet-node-a-" + wb::normalize_range(*IpPrefix::parse(range))).allocations) left.insert(a.id);
  }
  CHECK(left == std::set<std::string>{"live", "ipamclaim:default/vm"});
  CHECK(reservations(ns) == 2);
}

// Keep this case last: its Node moves the process into a fresh network namespace, where the
// file's shared API server cannot be reached.
TEST_CASE("the plumb binary on a whereabouts NAD without etcd: ADD, CHECK, DEL; the API server failing during ADD and DEL") {
  test::Node node;
  test::KubeCluster c(node);
  c.add_nad("default", "wb",
            R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-wb", "ipam": {"type": "whereabouts",
                "range": "192.0.2.0/24", "gateway": "192.0.2.1", "network_name": "wb"}})");
  const std::string conf = c.config(R"("whereaboutsNamespace": "ipam")");
  const std::map<std::string, std::string> env = {{"NODE_NAME", "node-a"}};
  auto held = [&] {
    std::set<std::string> ids;
    std::string text = c.api.get("ippools", "ipam", "wb-192.0.2.0-24");
    if (text.empty()) return ids;
    auto p = wb::decode_pool(doc(text), "pool");
    REQUIRE(p.has_value());
    for (auto& [off, a] : p->allocations) ids.insert(a.id);
    return ids;
  };
  // Records live in one directory per (container ID, CNI_IFNAME).
  auto has_record = [&](const std::string& cid) { return std::filesystem::exists(c.fx.state() + "/containers/" + cid + ":eth0"); };

  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "wb"}});
  std::string ns = node.add_netns("web");
  test::Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", conf, env);
  REQUIRE_MESSAGE(add.exit_code == 0, add.out, add.err);
  CHECK(test::link_names("web").count("net1") == 1);
  CHECK(held() == std::set<std::string>{"ctr-1"});
  test::Proc check = c.run("CHECK", "ctr-1", ns, "default", "web", "uid-1", conf, env);
  CHECK_MESSAGE(check.exit_code == 0, check.out);

  // The API server goes away: DEL tears the kernel side down and keeps the release pending.
  c.api.stop();
  test::Proc del = c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", conf, env);
  CHECK(del.exit_code != 0);
  CHECK_MESSAGE(del.out.find(R"("code":11)") != std::string::npos, del.out);
  CHECK(test::link_names("web") == std::set<std::string>{"lo"});
  CHECK(has_record("ctr-1"));
  c.api.restart();
  CHECK(held() == std::set<std::string>{"ctr-1"});
  test::Proc del2 = c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", conf, env);
  CHECK_MESSAGE(del2.exit_code == 0, del2.out);
  CHECK_FALSE(has_record("ctr-1"));
  CHECK(held().empty());

  // The pool cannot be written during ADD: the ADD fails (code 11) with nothing attached; the
  // runtime's DEL completes the release once the API server answers again.
  c.api.set_faults(R"([{"match": "/ippools/", "action": "fail", "code": 503}])");
  test::Proc bad = c.run("ADD", "ctr-2", ns, "default", "web", "uid-1", conf, env);
  CHECK(bad.exit_code != 0);
  CHECK_MESSAGE(bad.out.find(R"("code":11)") != std::string::npos, bad.out);
  CHECK(test::link_names("web") == std::set<std::string>{"lo"});
  c.api.set_faults("[]");
  test::Proc del3 = c.run("DEL", "ctr-2", ns, "default", "web", "uid-1", conf, env);
  CHECK_MESSAGE(del3.exit_code == 0, del3.out);
  CHECK_FALSE(has_record("ctr-2"));
  CHECK(held().empty());
}
