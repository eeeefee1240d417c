// Cluster-wide IPAM against a real etcd (Debian's etcd-server, started per case on loopback
// ports of the case's private node namespace, never 2379, stopped by pid): allocation, release,
// GC, IPAMClaim owners, TLS and authentication, etcd unreachable; the outage case drives the real
// plumb binary through PodFixture. Addresses handed out by the library-level cases are never
// configured on any interface; the large pools use 198.18.0.0/15 (RFC 2544, reserved for
// benchmarking) because no documentation range is bigger than a /24. Concurrent nodes (separate
// processes with their own node names) and a leader killed mid-run: cluster_etcd_concurrency_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/ipam/cluster_etcd_helpers.hpp"
#include "tests/support/concurrent_nodes.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::test::cluster_etcd;
namespace cl = plumb::ipam::cluster;
namespace etcd = plumb::ipam::etcd;

TEST_CASE("dual stack: both addresses in one transaction; an exhausted IPv6 range claims nothing of IPv4") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  const std::string text = ipam_json(
      R"("ipRanges": [{"range": "192.0.2.0/24"}, {"range": "2001:db8:1::/126"}], "gateway": "192.0.2.1",
         "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["192.0.2.53"]})",
      etcd_.endpoints_json());
  auto ipam = make_ipam(text, "node-a");

  // 2001:db8:1::/126 hands out ::1, ::2, ::3.
  std::set<std::string> v6;
  for (int i = 0; i < 3; ++i) {
    auto r = ipam->add(request("c" + std::to_string(i)));
    REQUIRE_MESSAGE(r.has_value(), r.error().text());
    REQUIRE(r->ips.size() == 2);
    CHECK(r->ips[0].address.addr.is_v4());
    CHECK(r->ips[0].address.len == 24);
    CHECK(r->ips[0].gateway == IpAddr::parse("192.0.2.1").value());
    CHECK(r->ips[0].address.addr != IpAddr::parse("192.0.2.1").value());
    CHECK_FALSE(r->ips[1].address.addr.is_v4());
    CHECK(r->ips[1].address.len == 126);
    CHECK(r->routes.size() == 1);
    CHECK(r->dns.nameservers == std::vector<std::string>{"192.0.2.53"});
    v6.insert(r->ips[1].address.addr.str());
  }
  CHECK(v6 == std::set<std::string>{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::3"});
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 6);

  // The IPv6 range is full: the ADD fails naming it and claims no IPv4 address either.
  auto full = ipam->add(request("c-full"));
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().cni_code == cni_code::kIpamExhausted);
  CHECK_MESSAGE(full.error().msg.find("2001:db8:1::/126") != std::string::npos, full.error().msg);
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 6);
  CHECK(keys_under(c, cl::owner_prefix("_default")).size() == 3);

  // The transaction itself is atomic: requested addresses skip every pre-read, so only the
  // compare sees that 2001:db8:1::2 is taken, and the free 192.0.2.200 must stay unclaimed.
  auto req = request("c-requested");
  const auto wanted = doc(R"({"ips": ["192.0.2.200", "2001:db8:1::2"]})");  // runtimeConfig.ips (CNI_ARGS IP= is whereabouts' static address)
  req.runtime_config = &wanted;
  auto taken = ipam->add(req);
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().cni_code == cni_code::kIpamExhausted);
  CHECK_MESSAGE(taken.error().msg.find("2001:db8:1::2 is already allocated") != std::string::npos, taken.error().msg);
  CHECK(ipam->last_add_stats().claims == 1);
  CHECK(ipam->last_add_stats().windows == 0);
  auto v4key = c.range(cl::ip_key("_default", *IpAddr::parse("192.0.2.200")));
  REQUIRE(v4key.has_value());
  CHECK(v4key->kvs.empty());
  CHECK(keys_under(c, cl::owner_prefix("_default")).count(cl::owner_key("_default", "c-requested", "net1")) == 0);

  // After a release the same request succeeds with exactly those addresses.
  REQUIRE(ipam->del(request("c1")).has_value());
  REQUIRE(ipam->del(request("c0")).has_value());
  REQUIRE(ipam->del(request("c2")).has_value());
  auto ok = ipam->add(req);
  REQUIRE_MESSAGE(ok.has_value(), ok.error().text());
  CHECK(addrs_of(*ok) == std::vector<std::string>{"192.0.2.200/24", "2001:db8:1::2/126"});
}

TEST_CASE("exhausting a /28 gives a clear error naming the range and claims nothing") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  auto ipam = make_ipam(ipam_json(R"("range": "192.0.2.0/28", "network_name": "small")", etcd_.endpoints_json()), "node-a");
  std::set<std::string> got;
  for (int i = 0; i < 14; ++i) {  // .1 .. .14
    auto r = ipam->add(request("c" + std::to_string(i)));
    REQUIRE_MESSAGE(r.has_value(), r.error().text());
    got.insert(r->ips.at(0).address.addr.str());
  }
  CHECK(got.size() == 14);
  CHECK(got.count("192.0.2.0") == 0);
  CHECK(got.count("192.0.2.15") == 0);
  auto r = ipam->add(request("c-15"));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kIpamExhausted);
  CHECK_MESSAGE(r.error().msg.find("pool exhausted") != std::string::npos, r.error().msg);
  CHECK_MESSAGE(r.error().msg.find("192.0.2.0/28 (192.0.2.1-192.0.2.14)") != std::string::npos, r.error().msg);
  CHECK_MESSAGE(r.error().msg.find("\"small\"") != std::string::npos, r.error().msg);
  CHECK(ipam->last_add_stats().windows <= 2);  // the whole /28: up to and from the cursor
  CHECK(ipam->last_add_stats().claims == 0);
  CHECK(keys_under(c, cl::ip_prefix("small")).size() == 14);
  CHECK(keys_under(c, cl::owner_prefix("small")).size() == 14);
  // A second node sees the same full pool.
  auto other = make_ipam(ipam_json(R"("range": "192.0.2.0/28", "network_name": "small")", etcd_.endpoints_json()), "node-b");
  auto r2 = other->add(request("c-16"));
  REQUIRE_FALSE(r2.has_value());
  CHECK(r2.error().cni_code == cni_code::kIpamExhausted);
}

TEST_CASE("ADD repeated for the same container and interface returns the same addresses") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  const std::string text =
      ipam_json(R"("ipRanges": [{"range": "198.51.100.0/24"}, {"range": "2001:db8:2::/64"}])", etcd_.endpoints_json());
  auto ipam = make_ipam(text, "node-a");
  auto first = ipam->add(request("c1"));
  REQUIRE_MESSAGE(first.has_value(), first.error().text());
  auto again = ipam->add(request("c1"));
  REQUIRE_MESSAGE(again.has_value(), again.error().text());
  CHECK(addrs_of(*again) == addrs_of(*first));
  CHECK(ipam->last_add_stats().claims == 0);
  // The same from another process's view (a fresh client), and for another interface: new ones.
  auto fresh = make_ipam(text, "node-a");
  auto third = fresh->add(request("c1"));
  REQUIRE(third.has_value());
  CHECK(addrs_of(*third) == addrs_of(*first));
  auto net2 = fresh->add(request("c1", "net2"));
  REQUIRE(net2.has_value());
  CHECK(addrs_of(*net2) != addrs_of(*first));
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 4);
  CHECK(keys_under(c, cl::owner_prefix("_default")).size() == 2);
  // CHECK agrees; DEL releases; DEL again is fine; a new ADD may get anything.
  CHECK(ipam->check(request("c1"), *first).has_value());
  REQUIRE(ipam->del(request("c1")).has_value());
  CHECK_FALSE(ipam->check(request("c1"), *first).has_value());
  REQUIRE(ipam->del(request("c1")).has_value());
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 2);
  // A requested address that differs from what the attachment holds is a conflict.
  auto req = request("c1", "net2");
  const auto wanted = doc(R"({"ips": ["198.51.100.250"]})");
  req.runtime_config = &wanted;
  auto conflict = ipam->add(req);
  REQUIRE_FALSE(conflict.has_value());
  CHECK(conflict.error().cni_code == cni_code::kConflict);
}

TEST_CASE("release by a non-owner is refused; a stale owner record frees only its own addresses") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  const std::string text = ipam_json(R"("range": "203.0.113.0/24")", etcd_.endpoints_json());
  auto a = make_ipam(text, "node-a");
  auto b = make_ipam(text, "node-b");
  auto held = a->add(request("owner-a"));
  REQUIRE(held.has_value());
  IpAddr ip = held->ips.at(0).address.addr;
  const std::string key = cl::ip_key("_default", ip);

  auto refused = b->release_address(ip, "intruder", "net1");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().cni_code == cni_code::kConflict);
  CHECK_MESSAGE(refused.error().msg.find("owner-a") != std::string::npos, refused.error().msg);
  CHECK(keys_under(c, key).size() == 1);

  // DEL of another attachment leaves it alone.
  REQUIRE(b->del(request("intruder")).has_value());
  CHECK(keys_under(c, key).size() == 1);

  // An owner record that (wrongly) lists the address: its release skips the address.
  std::string forged = R"({"containerID":"stale","ifname":"net1","podRef":"","node":"node-b","time":"","ips":[")" +
                       held->ips[0].address.str() + R"("]})";
  REQUIRE(c.put(cl::owner_key("_default", "stale", "net1"), forged).has_value());
  REQUIRE(b->del(request("stale")).has_value());
  CHECK(keys_under(c, key).size() == 1);
  CHECK(doc(keys_under(c, key).begin()->second)["containerID"] == "owner-a");
  CHECK(keys_under(c, cl::owner_key("_default", "stale", "net1")).empty());

  // The owner itself releases it.
  REQUIRE(a->release_address(ip, "owner-a", "net1").has_value());
  CHECK(keys_under(c, key).empty());
  CHECK(keys_under(c, cl::owner_prefix("_default")).empty());
}

TEST_CASE("a /16 costs a handful of reads: windows start at the node's cursor and grow") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  auto ipam = make_ipam(ipam_json(R"("range": "198.18.0.0/16")", etcd_.endpoints_json()), "node-a");
  // The node stopped at 198.18.4.0 last time, and the next 1,000 addresses are taken.
  const IpAddr cursor = *IpAddr::parse("198.18.4.0");
  REQUIRE(c.put(cl::cursor_key("_default", "node-a"), R"j({"198.18.0.0/16 (198.18.0.1-198.18.255.254)": "198.18.4.0"})j").has_value());
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<etcd::TxnOp> puts;
    for (int i = 1; i <= 100; ++i) {
      puts.push_back(etcd::TxnOp::put(cl::ip_key("_default", cursor.plus(static_cast<uint64_t>(batch * 100 + i))),
                                      R"({"containerID":"filler","ifname":"net1"})"));
    }
    REQUIRE(c.txn({}, puts, {}).has_value());
  }
  auto r = ipam->add(request("c1"));
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  CHECK(r->ips.at(0).address.addr == cursor.plus(1001));
  const auto& st = ipam->last_add_stats();
  MESSAGE("requests ", st.requests, ", windows ", st.windows, ", claims ", st.claims);
  CHECK(st.windows <= 5);  // 64 + 128 + 256 + 512 + 1024 addresses
  CHECK(st.claims == 1);
  CHECK(st.requests <= 7);
  // The next ADD continues right after it: one window, one claim.
  auto r2 = ipam->add(request("c2"));
  REQUIRE(r2.has_value());
  CHECK(r2->ips.at(0).address.addr == cursor.plus(1002));
  CHECK(ipam->last_add_stats().windows == 1);
  CHECK(ipam->last_add_stats().requests == 3);
}

TEST_CASE("GC releases this node's allocations whose owners are gone, keeps IPAMClaim and other nodes' ones") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  const std::string text = ipam_json(R"("range": "192.0.2.0/24")", etcd_.endpoints_json());
  auto a = make_ipam(text, "node-a");
  auto b = make_ipam(text, "node-b");
  for (const char* cid : {"live", "gone-1", "gone-2", "ipamclaim:default/vm-disk"}) REQUIRE(a->add(request(cid)).has_value());
  REQUIRE(b->add(request("other-node")).has_value());
  std::vector<std::string> asked;
  auto st = a->gc(request("unused"), [&](const std::string& cid, const std::string& ifname) {
    asked.push_back(cid + "/" + ifname);
    return cid == "live";
  });
  REQUIRE_MESSAGE(st.has_value(), st.error().text());
  std::set<std::string> owners;
  for (auto& [k, v] : keys_under(c, cl::owner_prefix("_default"))) owners.insert(doc(v)["containerID"].GetString());
  CHECK(owners == std::set<std::string>{"live", "ipamclaim:default/vm-disk", "other-node"});
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 3);
  // Only this node's non-claim owners were asked about.
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<std::string>{"gone-1/net1", "gone-2/net1", "live/net1"});
}

TEST_CASE("IPAMClaim owner: addresses survive the pod's DEL, follow the claim, honour status.ips, go with the claim") {
  Node node;
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto c = inspector(etcd_);
  // As the orchestrator hands a claim over: Request::owner and Request::owner_ips.
  auto conf = doc(ipam_json(R"("range": "192.0.2.0/24")", etcd_.endpoints_json()));
  auto ipam = make_ipam(json::dump(conf), "node-a");
  auto req = request("pod-1-sandbox");
  req.ipam = &conf;
  req.owner = "ipamclaim:default/vm1";
  auto first = ipam->add(req);
  REQUIRE_MESSAGE(first.has_value(), first.error().text());
  CHECK(keys_under(c, cl::owner_prefix("_default")).count(cl::owner_key("_default", "ipamclaim:default/vm1", "claim")) == 1);
  // The pod's DEL (no Request::owner) leaves the claim's address alone; GC keeps it too.
  auto pod_del = request("pod-1-sandbox");
  pod_del.ipam = &conf;
  REQUIRE(ipam->del(pod_del).has_value());
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 1);
  REQUIRE(ipam->gc(req, [](const std::string&, const std::string&) { return false; }).has_value());
  CHECK(keys_under(c, cl::ip_prefix("_default")).size() == 1);
  // The next pod naming the claim, on another interface name, gets the same address.
  auto req2 = request("pod-2-sandbox", "net7");
  req2.ipam = &conf;
  req2.owner = "ipamclaim:default/vm1";
  auto second = ipam->add(req2);
  REQUIRE(second.has_value());
  CHECK(addrs_of(*second) == addrs_of(*first));
  // status.ips are honoured for a claim that has them.
  auto req3 = request("pod-3-sandbox");
  req3.ipam = &conf;
  req3.owner = "ipamclaim:default/vm2";
  req3.owner_ips = {"192.0.2.77/24"};
  auto third = make_ipam(json::dump(conf), "node-a")->add(req3);
  REQUIRE(third.has_value());
  CHECK(addrs_of(*third) == std::vector<std::string>{"192.0.2.77/24"});
  // The claim is gone: a release naming the owner frees the address.
  ipam::Request gone;
  gone.container_id = gone.owner = "ipamclaim:default/vm1";
  gone.network_name = "wb";
  gone.ipam = &conf;
  REQUIRE(ipam->del(gone).has_value());
  auto left = keys_under(c, cl::ip_prefix("_default"));
  REQUIRE(left.size() == 1);
  CHECK(key_addr(left.begin()->first) == "192.0.2.77");
}

TEST_CASE("etcd unreachable: a clear error naming every endpoint after a bounded retry; nothing claimed") {
  Node node;
  const std::string eps = R"(["http://127.0.0.1:32391", "127.0.0.1:32393"])";
  auto ipam = make_ipam(R"({"type": "plumb-cluster", "range": "192.0.2.0/24", "etcd_endpoints": )" + eps +
                            R"(, "etcd_retry_timeout_ms": 1000})",
                        "node-a");
  auto t0 = std::chrono::steady_clock::now();
  auto r = ipam->add(request("c1"));
  double took = seconds_since(t0);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kTryAgainLater);
  CHECK_MESSAGE(r.error().msg.find("etcd unreachable at http://127.0.0.1:32391, http://127.0.0.1:32393") != std::string::npos,
                r.error().msg);
  CHECK(took < 3.0);
  CHECK(took >= 0.9);  // it did retry for its budget
  auto d = ipam->del(request("c1"));
  REQUIRE_FALSE(d.has_value());
  CHECK(d.error().cni_code == cni_code::kTryAgainLater);
}

TEST_CASE("TLS with client certificates and username/password auth; a wrong password is an auth error") {
  Node node;
  auto tls = plumb::test::make_etcd_tls(node.dir() + "/tls");
  REQUIRE(tls.has_value());
  EtcdCluster etcd_(1, 32379, &*tls);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  auto with = [&](const std::string& cert, const std::string& key, const std::string& auth) {
    return ipam_json(R"("range": "192.0.2.0/24")", etcd_.endpoints_json(),
                     R"("etcd_ca_cert_file": ")" + tls->ca + R"(", "etcd_cert_file": ")" + cert + R"(", "etcd_key_file": ")" +
                         key + "\"" + auth);
  };
  // Mutual TLS alone.
  auto mtls = make_ipam(with(tls->client_cert, tls->client_key, ""), "node-a");
  auto r = mtls->add(request("c1"));
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  CHECK(r->ips.at(0).address.addr.is_v4());
  REQUIRE(mtls->del(request("c1")).has_value());

  // Authentication on: user and password give a token.
  REQUIRE(etcd_.enable_auth("plumb", "s3cret"));
  const std::string user = R"(, "etcd_username": "plumb", "etcd_password": ")";
  auto good = make_ipam(with(tls->anon_cert, tls->anon_key, user + "s3cret\""), "node-a");
  r = good->add(request("c2"));
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  CHECK(good->check(request("c2"), *r).has_value());
  REQUIRE(good->del(request("c2")).has_value());

  auto bad = make_ipam(with(tls->anon_cert, tls->anon_key, user + "wrong\""), "node-a");
  auto denied = bad->add(request("c3"));
  REQUIRE_FALSE(denied.has_value());
  CHECK(denied.error().cni_code == cni_code::kInvalidConfig);
  CHECK_MESSAGE(denied.error().msg.find("etcd authentication failed for user \"plumb\"") != std::string::npos,
                denied.error().msg);
  CHECK(bad->last_add_stats().requests == 1);  // a refused password is not retried

  // No user while authentication is on: refused, and the message says what to set.
  auto anonymous = make_ipam(with(tls->anon_cert, tls->anon_key, ""), "node-a");
  auto refused = anonymous->add(request("c4"));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().cni_code == cni_code::kInvalidConfig);
  CHECK_MESSAGE(refused.error().msg.find("etcd_username") != std::string::npos, refused.error().msg);
}

namespace {

/// Owners GC must tell apart in the pool of 192.0.2.0/24: this node's "orphan" with no record
/// here at all (swept), an IPAMClaim's and another node's (kept).
void add_owners_without_records(const EtcdCluster& etcd) {
  const std::string text = ipam_json(R"("range": "192.0.2.0/24")", etcd.endpoints_json());
  auto here = make_ipam(text, cl::node_name().value());
  auto elsewhere = make_ipam(text, "another-node");
  REQUIRE(here->add(request("orphan")).has_value());
  REQUIRE(here->add(request("ipamclaim:default/keep-me")).has_value());
  REQUIRE(elsewhere->add(request("remote")).has_value());
}

}  // namespace

TEST_CASE("etcd down: ADD attaches nothing; DEL tears down the kernel side and the next DEL or GC completes the release") {
  Node node;
  PodFixture fx(node);
  EtcdCluster etcd_(1, 32379);
  REQUIRE_MESSAGE(etcd_.ok(), etcd_.log(0));
  fx.add_nad("default", "wb",
             R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-wb", "ipam": {"type": "whereabouts", )"
             R"("range": "192.0.2.0/24", "gateway": "192.0.2.1", "etcd_endpoints": )" +
                 etcd_.endpoints_json() + R"(, "etcd_retry_timeout_ms": 1500}})");
  const std::string conf = fx.config();
  auto c = inspector(etcd_);
  auto addr_keys = [&] {
    auto r = c.range(cl::ip_prefix("_default"), etcd::prefix_end(cl::ip_prefix("_default")), true);
    REQUIRE_MESSAGE(r.has_value(), r.error().text());
    return r->kvs.size();
  };
  auto bridge_ports = [] { return plumb::test::ip_json("link show master br-wb").Size(); };
  auto has_record = [&](const std::string& cid) { return std::filesystem::exists(fx.state() + "/containers/" + cid + ":eth0"); };

  for (const std::string& finish : {std::string("DEL"), std::string("GC")}) {
    CAPTURE(finish);
    const std::string cid = "cid-" + finish;
    const std::string pod = "pod-" + std::string(finish == "DEL" ? "del" : "gc");
    std::string ns = node.add_netns(pod);
    fx.add_pod("default", pod, R"([{"name": "wb"}])");
    Proc add = fx.run("ADD", cid, ns, "default", pod, conf);
    REQUIRE_MESSAGE(add.exit_code == 0, add.out, add.err);
    auto result = doc(add.out);
    CHECK(plumb::test::link_names(pod).count("net1") == 1);
    CHECK(addr_keys() == 1);
    CHECK(bridge_ports() == 1);

    etcd_.kill(0);
    Proc del = fx.run("DEL", cid, ns, "default", pod, conf);
    CHECK(del.exit_code != 0);
    CHECK_MESSAGE(del.out.find("etcd unreachable at " + etcd_.client_url(0)) != std::string::npos, del.out);
    CHECK(plumb::test::link_names(pod) == std::set<std::string>{"lo"});  // kernel side gone: eth0 and net1
    CHECK(bridge_ports() == 0);
    CHECK(has_record(cid));                              // the release is pending in state

    REQUIRE(etcd_.restart(0));
    CHECK(addr_keys() == 1);  // still allocated until the retry
    if (finish == "GC") {
      // GC also sweeps the pool for this node's owners that have no record here at all, and
      // keeps IPAMClaim-held addresses and other nodes' ones.
      add_owners_without_records(etcd_);
      CHECK(addr_keys() == 4);
    }
    Proc again = finish == "DEL" ? fx.run("DEL", cid, ns, "default", pod, conf)
                                 : fx.run("GC", "", "", "", "", fx.config(R"("cni.dev/valid-attachments": [])", "1.1.0"));
    CHECK_MESSAGE(again.exit_code == 0, again.out, again.err);
    CHECK_FALSE(has_record(cid));
    if (finish == "DEL") {
      CHECK(addr_keys() == 0);
    } else {
      std::set<std::string> owners;
      for (auto& [k, v] : keys_under(c, cl::owner_prefix("_default"))) owners.insert(doc(v)["containerID"].GetString());
      CHECK(owners == std::set<std::string>{"ipamclaim:default/keep-me", "remote"});
      CHECK(addr_keys() == 2);
    }
    node.del_netns(pod);
  }

  // An ADD while etcd is down attaches nothing and leaves its release pending; DEL finishes it.
  etcd_.kill(0);
  std::string ns = node.add_netns("pod-down");
  fx.add_pod("default", "pod-down", R"([{"name": "wb"}])");
  Proc add = fx.run("ADD", "cid-down", ns, "default", "pod-down", conf);
  CHECK(add.exit_code != 0);
  CHECK_MESSAGE(add.out.find("etcd unreachable at " + etcd_.client_url(0)) != std::string::npos, add.out);
  CHECK(plumb::test::link_names("pod-down") == std::set<std::string>{"lo"});
  CHECK(bridge_ports() == 0);
  REQUIRE(etcd_.restart(0));
  Proc del = fx.run("DEL", "cid-down", ns, "default", "pod-down", conf);
  CHECK_MESSAGE(del.exit_code == 0, del.out, del.err);
  CHECK(addr_keys() == 2);  // the IPAMClaim's and the other node's
  CHECK_FALSE(has_record("cid-down"));
}
