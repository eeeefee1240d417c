// Helpers of the cluster IPAM's etcd tests (cluster_etcd_test.cpp,
// cluster_etcd_concurrency_test.cpp): whereabouts "ipam" objects naming etcd endpoints, an
// allocator made or the case fails, requests, and an independent etcd client reading the keys
// back.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace plumb::test::cluster_etcd {

/// `text` parsed as JSON, or the case fails.
inline json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

/// A whereabouts "ipam" object: `body` holds the range keys, endpoints the etcd_endpoints array
/// (JSON text), `extra` more members (JSON text without braces); a retry budget of 15,000 ms.
inline std::string ipam_json(const std::string& body, const std::string& endpoints, const std::string& extra = "") {
  return R"({"type": "whereabouts", )" + body + R"(, "etcd_endpoints": )" + endpoints +
         R"(, "etcd_retry_timeout_ms": 15000)" + (extra.empty() ? "" : ", " + extra) + "}";
}

/// The cluster IPAM of the "ipam" object `text` as node `node`, or the case fails.
inline std::unique_ptr<ipam::cluster::ClusterIpam> make_ipam(const std::string& text, const std::string& node) {
  auto d = doc(text);
  auto made = ipam::cluster::make(d, node);
  REQUIRE_MESSAGE(made.has_value(), (made ? "" : made.error().text()));
  return std::move(*made);
}

/// An ADD/DEL request of network "wb" for container `cid` (pod default/pod-<cid>) on `ifname`.
inline ipam::Request request(const std::string& cid, const std::string& ifname = "net1") {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = ifname;
  r.network_name = "wb";
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "pod-" + cid}};
  return r;
}

/// A client of `e`'s members of its own, to read back what the allocators wrote.
inline ipam::etcd::Client inspector(const EtcdCluster& e) {
  ipam::etcd::Options o;
  o.endpoints = e.client_urls();
  auto c = ipam::etcd::Client::make(o);
  REQUIRE(c.has_value());
  return std::move(*c);
}

/// Every key under `prefix` with its value.
inline std::map<std::string, std::string> keys_under(ipam::etcd::Client& c, const std::string& prefix) {
  auto r = c.range(prefix, ipam::etcd::prefix_end(prefix));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  std::map<std::string, std::string> out;
  for (auto& kv : r->kvs) out[kv.key] = kv.value;
  return out;
}

/// A result's addresses as "<addr>/<len>", in order.
inline std::vector<std::string> addrs_of(const cni::CniResult& r) {
  std::vector<std::string> out;
  for (auto& ip : r.ips) out.push_back(ip.address.str());
  return out;
}

/// The address part of an address key ("/plumb/ipam/<pool>/198.018.000.001" -> "198.18.0.1").
inline std::string key_addr(const std::string& key) {
  auto a = ipam::cluster::parse_key_text(key.substr(key.rfind('/') + 1));
  REQUIRE_MESSAGE(a.has_value(), key);
  return a->str();
}

}  // namespace plumb::test::cluster_etcd
