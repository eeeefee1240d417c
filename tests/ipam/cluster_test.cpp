// Cluster IPAM without etcd: whereabouts config parsing (defaults, the start-end/prefix form,
// exclusions, dual stack, errors naming the field), the fixed-width address keys whose order is
// address order, and the etcd client's base64 and prefix helpers.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <cstdlib>
#include <random>
#include <string>

#include "engine/base/base64.hpp"
#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/etcd_client.hpp"
#include "ipam/ipam.hpp"

using namespace plumb;
namespace cl = plumb::ipam::cluster;
namespace etcd = plumb::ipam::etcd;

namespace {

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

IpAddr ip(const char* s) { return IpAddr::parse(s).value(); }

constexpr const char* kEtcd = R"("etcd_host": "127.0.0.1:32379")";

Result<cl::Config> parse(const std::string& body) {
  auto d = doc(R"({"type": "whereabouts", )" + body + "}");
  return cl::parse_config(d);
}

std::string error_of(const std::string& body) {
  auto c = parse(body);
  REQUIRE_FALSE_MESSAGE(c.has_value(), body);
  CHECK(c.error().cni_code == cni_code::kInvalidConfig);
  return c.error().msg;
}

}  // namespace

TEST_CASE("whereabouts range: CIDR defaults skip network and broadcast; the gateway is never handed out") {
  auto c = parse(R"("range": "192.0.2.0/24", "gateway": "192.0.2.1", )" + std::string(kEtcd));
  REQUIRE_MESSAGE(c.has_value(), c.error().msg);
  REQUIRE(c->pools.size() == 1);
  const cl::Pool& p = c->pools[0];
  CHECK(p.subnet.str() == "192.0.2.0/24");
  CHECK(p.start == ip("192.0.2.1"));
  CHECK(p.end == ip("192.0.2.254"));
  CHECK(p.gateway == ip("192.0.2.1"));
  CHECK_FALSE(p.allocatable(ip("192.0.2.1")));
  CHECK(p.allocatable(ip("192.0.2.2")));
  CHECK_FALSE(p.allocatable(ip("192.0.2.255")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.1")));
  CHECK(c->pool_name == "_default");
  CHECK(c->etcd.endpoints == std::vector<std::string>{"127.0.0.1:32379"});
  CHECK(p.str() == "192.0.2.0/24 (192.0.2.1-192.0.2.254)");
}

TEST_CASE("whereabouts range: start-end/prefix form, range_start/range_end and exclude") {
  auto c = parse(R"("range": "192.0.2.225-192.0.2.230/28", )" + std::string(kEtcd));
  REQUIRE_MESSAGE(c.has_value(), c.error().msg);
  CHECK(c->pools[0].subnet.str() == "192.0.2.224/28");
  CHECK(c->pools[0].start == ip("192.0.2.225"));
  CHECK(c->pools[0].end == ip("192.0.2.230"));

  c = parse(R"("range": "198.51.100.0/24", "range_start": "198.51.100.10", "range_end": "198.51.100.20",
               "exclude": ["198.51.100.12/31", "198.51.100.15"], )" + std::string(kEtcd));
  REQUIRE_MESSAGE(c.has_value(), c.error().msg);
  const cl::Pool& p = c->pools[0];
  CHECK(p.start == ip("198.51.100.10"));
  CHECK(p.end == ip("198.51.100.20"));
  CHECK(p.allocatable(ip("198.51.100.11")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.12")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.13")));
  CHECK(p.allocatable(ip("198.51.100.14")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.15")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.21")));
  CHECK_FALSE(p.allocatable(ip("198.51.100.9")));
}

TEST_CASE("whereabouts ipRanges: dual stack after the top-level range, routes, dns, network_name, etcd settings") {
  auto c = parse(R"("range": "192.0.2.0/24", "ipRanges": [{"range": "2001:db8::/64", "exclude": ["2001:db8::/120"]}],
                    "network_name": "storage", "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["192.0.2.53"]},
                    "etcd_endpoints": ["https://127.0.0.1:32381"], "etcd_host": "127.0.0.1:32383, 127.0.0.1:32385",
                    "etcd_ca_cert_file": "/ca", "etcd_cert_file": "/c", "etcd_key_file": "/k",
                    "etcd_username": "u", "etcd_password": "p", "etcd_retry_timeout_ms": 2500)");
  REQUIRE_MESSAGE(c.has_value(), c.error().msg);
  REQUIRE(c->pools.size() == 2);
  CHECK(c->pools[0].subnet.str() == "192.0.2.0/24");
  CHECK(c->pools[1].subnet.str() == "2001:db8::/64");
  CHECK(c->pools[1].start == ip("2001:db8::1"));
  CHECK(c->pools[1].end == ip("2001:db8::ffff:ffff:ffff:ffff"));
  CHECK_FALSE(c->pools[1].allocatable(ip("2001:db8::ff")));
  CHECK(c->pools[1].allocatable(ip("2001:db8::100")));
  CHECK(c->pool_name == "storage");
  CHECK(c->routes.size() == 1);
  CHECK(c->dns.nameservers == std::vector<std::string>{"192.0.2.53"});
  CHECK(c->etcd.endpoints ==
        std::vector<std::string>{"127.0.0.1:32383", "127.0.0.1:32385", "https://127.0.0.1:32381"});
  CHECK(c->etcd.ca_file == "/ca");
  CHECK(c->etcd.cert_file == "/c");
  CHECK(c->etcd.key_file == "/k");
  CHECK(c->etcd.username == "u");
  CHECK(c->etcd.password == "p");
  CHECK(c->etcd.retry_timeout_ms == 2500);
}

TEST_CASE("whereabouts config errors name the field and value") {
  CHECK(error_of(kEtcd).find("ipam has no range") != std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/33", )" + std::string(kEtcd)).find("ipam.range") != std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "range_start": "192.0.2.50", "range_end": "192.0.2.40", )" + std::string(kEtcd))
            .find("192.0.2.50 is after range end 192.0.2.40") != std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "range_start": "198.51.100.1", )" + std::string(kEtcd))
            .find("198.51.100.1 is not in subnet 192.0.2.0/24") != std::string::npos);
  CHECK(error_of(R"("range_start": "192.0.2.5", )" + std::string(kEtcd)).find("ipam.range_start is set without ipam.range") !=
        std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "ipRanges": [{"range": "192.0.2.128/25"}], )" + std::string(kEtcd))
            .find("overlap") != std::string::npos);
  CHECK(error_of(R"("ipRanges": [{"range_start": "192.0.2.1"}], )" + std::string(kEtcd)).find("ipam.ipRanges[0].range is missing") !=
        std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "exclude": ["2001:db8::/64"], )" + std::string(kEtcd)).find("ipam.exclude[0]") !=
        std::string::npos);
  // No etcd key is whereabouts' Kubernetes datastore (tests/ipam/cluster_kube_test.cpp); "etcd" needs one.
  CHECK(error_of(R"("range": "192.0.2.0/24", "datastore": "etcd")").find("ipam.etcd_host (or ipam.etcd_endpoints) is missing") !=
        std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "datastore": "consul")").find("ipam.datastore \"consul\"") != std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "etcd_cert_file": "/c", )" + std::string(kEtcd)).find("etcd_key_file") !=
        std::string::npos);
  CHECK(error_of(R"("range": "192.0.2.0/24", "network_name": "a/b", )" + std::string(kEtcd)).find("\"a/b\"") != std::string::npos);
}

TEST_CASE("ipam::make builds whereabouts and plumb-cluster without contacting etcd; the node name must be usable") {
  auto d = doc(R"({"type": "plumb-cluster", "range": "192.0.2.0/24", "etcd_endpoints": ["ftp://127.0.0.1:1"]})");
  auto bad_url = ipam::make(d);
  REQUIRE_FALSE(bad_url.has_value());
  CHECK(bad_url.error().msg.find("ftp://127.0.0.1:1") != std::string::npos);

  d = doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "etcd_host": "127.0.0.1:32379"})");
  ::setenv("NODE_NAME", "node-7", 1);
  CHECK(cl::node_name().value() == "node-7");
  CHECK(ipam::make(d).has_value());
  ::setenv("NODE_NAME", "bad/name", 1);
  auto bad_node = ipam::make(d);
  REQUIRE_FALSE(bad_node.has_value());
  CHECK(bad_node.error().cni_code == cni_code::kInvalidEnv);
  ::unsetenv("NODE_NAME");
  CHECK_FALSE(cl::node_name().value().empty());  // the host name
}

TEST_CASE("address keys are fixed width, round-trip, and sort in address order") {
  CHECK(cl::key_text(ip("192.0.2.7")) == "192.000.002.007");
  CHECK(cl::key_text(ip("2001:db8::1")) == "2001:0db8:0000:0000:0000:0000:0000:0001");
  CHECK(cl::ip_key("net", ip("192.0.2.7")) == "/plumb/ipam/net/192.000.002.007");
  CHECK(cl::owner_key("net", "abc", "net1") == "/plumb/owners/net/abc/net1");
  CHECK(cl::cursor_key("net", "node-1") == "/plumb/cursors/net/node-1");
  CHECK(cl::parse_key_text("192.000.002.007").value() == ip("192.0.2.7"));
  CHECK_FALSE(cl::parse_key_text("192.0.2.7").has_value());
  CHECK_FALSE(cl::parse_key_text("192.000.002.256").has_value());
  CHECK_FALSE(cl::parse_key_text("2001:0db8:0000:0000:0000:0000:0000:000g").has_value());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    IpAddr a, b;
    a.family = b.family = (i % 2) ? AF_INET : AF_INET6;
    size_t n = a.family == AF_INET ? 4 : 16;
    for (size_t k = 0; k < n; ++k) {
      a.bytes[k] = static_cast<uint8_t>(rng());
      b.bytes[k] = static_cast<uint8_t>(k < n - 2 ? a.bytes[k] : rng());  // often close together
    }
    CHECK(cl::parse_key_text(cl::key_text(a)).value() == a);
    CHECK((a < b) == (cl::key_text(a) < cl::key_text(b)));
  }
}

TEST_CASE("etcd client helpers: base64 keys and values, prefix range ends") {
  for (std::string s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"), std::string("/plumb/ipam/x"),
                        std::string("\0\xff\x10", 3)}) {
    auto back = base64::decode(base64::encode(s), "test");
    REQUIRE(back.has_value());
    CHECK(*back == s);
  }
  CHECK(base64::encode("/a/1") == "L2EvMQ==");
  CHECK_FALSE(base64::decode("abc", "test").has_value());
  CHECK_FALSE(base64::decode("a*==", "test").has_value());
  CHECK(etcd::prefix_end("/plumb/ipam/") == "/plumb/ipam0");
  CHECK(etcd::prefix_end(std::string("a\xff", 2)) == "b");
}
