// Helpers of the cluster IPAM's Kubernetes datastore tests (cluster_kube_test.cpp,
// cluster_kube_concurrency_test.cpp): the executable's one API test server
// (tests/support/kube_api_test_server.py) on the loopback of its private network namespace,
// API clients of it, allocators made or the case fails, requests, and the stored whereabouts
// objects read back.
#pragma once

#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "engine/base/json.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/whereabouts.hpp"
#include "tests/support/kube_api_server.hpp"
#include "tests/support/pod_fixture.hpp"

namespace plumb::test::cluster_kube {

/// The executable's API server (accepting the token "tok"), started in the current network
/// namespace by the first case that needs it, stopped at exit. Cases that build a Node leave
/// that namespace: they run after every case using this server.
inline KubeApiServer& api() {
  struct Holder {
    std::string dir;
    std::unique_ptr<KubeApiServer> server;
    Holder() {
      char tmpl[] = "/tmp/plumb-kube-ipam-XXXXXX";
      REQUIRE(::mkdtemp(tmpl) != nullptr);
      dir = tmpl;
      server = std::make_unique<KubeApiServer>(dir + "/api");
      server->set_tokens({"tok"});
    }
    ~Holder() {
      server.reset();
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static Holder h;
  return *h.server;
}

/// A client of api() with the token "tok": `timeout` per request, `retries` more attempts
/// (backoff 20 ms, at most 100 ms).
inline std::unique_ptr<k8s::Client> client(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000), int retries = 2) {
  k8s::Credentials c;
  c.server = api().url();
  c.ca_file = api().tls("ca.crt");
  c.token = "tok";
  c.origin = "test credentials";
  k8s::Options o;
  o.timeout = timeout;
  o.retries = retries;
  o.backoff = std::chrono::milliseconds(20);
  o.backoff_max = std::chrono::milliseconds(100);
  return std::make_unique<k8s::Client>(c, o);
}

/// `text` parsed as JSON, or the case fails.
inline json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

/// The Kubernetes-datastore allocator of the "ipam" object `ipam_text` as node `node`, working
/// in Kubernetes namespace `ns` through `c` (client() when null), or the case fails.
inline std::unique_ptr<ipam::cluster::KubeClusterIpam> make(const std::string& ipam_text, const std::string& node,
                                                            const std::string& ns, std::unique_ptr<k8s::Client> c = nullptr) {
  auto cfg = ipam::cluster::parse_config(doc(ipam_text));
  REQUIRE_MESSAGE(cfg.has_value(), (cfg ? "" : cfg.error().text()));
  REQUIRE(cfg->datastore == ipam::cluster::Datastore::Kubernetes);
  return ipam::cluster::make_kube(std::move(*cfg), node, c ? std::move(c) : client(), ns);
}

/// An ADD/DEL request of `network` for container `cid` of pod default/`pod` on `ifname`.
inline ipam::Request request(const std::string& cid, const std::string& pod, const std::string& ifname = "net1",
                             const std::string& network = "blue") {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = ifname;
  r.network_name = network;
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod}};
  return r;
}

/// The one address ("<addr>/<len>") an ADD that must succeed gives.
inline std::string add_ok(ipam::cluster::KubeClusterIpam& ipam, const ipam::Request& req) {
  auto r = ipam.add(req);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 1);
  return r->ips[0].address.str();
}

/// The text of tests/fixtures/whereabouts/`name`.
inline std::string fixture(const std::string& name) { return read_file(std::string(PLUMB_FIXTURES) + "/whereabouts/" + name); }

/// Whether a stored object's `member` equals the fixture `file` (objects compare member by
/// member, in any order).
inline bool stored_equals(const std::string& resource, const std::string& ns, const std::string& name, const char* member,
                          const std::string& file) {
  std::string text = api().get(resource, ns, name);
  if (text.empty()) return false;
  auto d = doc(text);
  const json::Value* v = json::find(d, member);
  auto want = doc(fixture(file));
  if (v == nullptr || *v != want) MESSAGE("stored ", member, ": ", (v ? json::dump(*v) : "none"), "\nexpected: ", json::dump(want));
  return v != nullptr && *v == want;
}

/// The allocations of a stored IPPool, decoded as whereabouts reads them.
inline ipam::whereabouts::IpPool pool_of(const std::string& ns, const std::string& name) {
  auto d = doc(api().get("ippools", ns, name));
  auto p = ipam::whereabouts::decode_pool(d, name);
  REQUIRE_MESSAGE(p.has_value(), (p ? "" : p.error().text()));
  return std::move(*p);
}

/// How many OverlappingRangeIPReservations Kubernetes namespace `ns` holds.
inline size_t reservations(const std::string& ns) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(api().dir() + "/objects/overlappingrangeipreservations/" + ns, ec);
       !ec && it != std::filesystem::directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

}  // namespace plumb::test::cluster_kube
