// IPAM configuration: host-local ranges (parsing, defaults, validation errors naming the field),
// the reference allocator's iteration order with gateway and IPv4 network/broadcast exclusion,
// resolv.conf parsing, and static IPAM (config, overrides, DEL/CHECK). No disk state is touched
// except a temporary resolv.conf.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "ipam/host_local.hpp"
#include "ipam/ipam.hpp"

using namespace plumb;
using namespace plumb::ipam;

namespace {

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

/// make() on `ipam`; returns the error (code and message) or nullopt on success.
std::optional<Error> make_error(const std::string& ipam) {
  json::Document d = doc(ipam);
  auto r = make(d);
  if (r) return std::nullopt;
  return r.error();
}

/// Asserts make() fails with kInvalidConfig and a message containing every fragment.
void expect_invalid(const std::string& ipam, const std::vector<std::string>& fragments) {
  auto e = make_error(ipam);
  INFO("ipam: ", ipam);
  REQUIRE(e.has_value());
  CHECK(e->cni_code == cni_code::kInvalidConfig);
  for (const auto& f : fragments) {
    INFO("message: ", e->msg);
    CHECK(e->msg.find(f) != std::string::npos);
  }
}

HostLocalConfig config(const std::string& ipam) {
  json::Document d = doc(ipam);
  auto c = parse_host_local_config(d);
  REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error().msg));
  return std::move(*c);
}

IpAddr ip(const char* s) { return *IpAddr::parse(s); }

std::vector<std::string> walk(const RangeSet& set, std::optional<IpAddr> last = std::nullopt) {
  std::vector<std::string> out;
  RangeIter it(set, last);
  while (auto c = it.next()) {
    out.push_back(c->first.str());
    REQUIRE(out.size() < 10000);  // bounded: one turn only
  }
  return out;
}

}  // namespace

TEST_CASE("host-local: defaults follow the reference (start .1, end broadcast-1, gateway .1)") {
  auto c = config(R"({"type":"host-local","ranges":[[{"subnet":"192.0.2.0/24"}],[{"subnet":"2001:db8::/64"}]]})");
  REQUIRE(c.ranges.size() == 2);
  const Range& v4 = c.ranges[0][0];
  CHECK(v4.subnet.str() == "192.0.2.0/24");
  CHECK(v4.start.str() == "192.0.2.1");
  CHECK(v4.end.str() == "192.0.2.254");
  CHECK(v4.gateway.str() == "192.0.2.1");
  const Range& v6 = c.ranges[1][0];
  CHECK(v6.start.str() == "2001:db8::1");
  CHECK(v6.end.str() == "2001:db8::ffff:ffff:ffff:ffff");
  CHECK(v6.gateway.str() == "2001:db8::1");
  CHECK(c.data_dir == "/var/lib/cni/networks");
  CHECK(c.resolv_conf.empty());
  CHECK(v4.str() == "192.0.2.0/24 (192.0.2.1-192.0.2.254)");
}

TEST_CASE("host-local: explicit fields, legacy top-level subnet first, routes, dataDir, resolvConf") {
  auto c = config(R"({"type":"host-local","subnet":"198.51.100.0/24","rangeStart":"198.51.100.10",
      "rangeEnd":"198.51.100.20","gateway":"198.51.100.254",
      "ranges":[[{"subnet":"192.0.2.0/25"},{"subnet":"192.0.2.128/25","gateway":"192.0.2.129"}]],
      "routes":[{"dst":"0.0.0.0/0"},{"dst":"203.0.113.0/24","gw":"198.51.100.254"}],
      "dataDir":"/tmp/x","resolvConf":"/etc/r.conf"})");
  REQUIRE(c.ranges.size() == 2);
  REQUIRE(c.ranges[0].size() == 1);
  CHECK(c.ranges[0][0].start.str() == "198.51.100.10");
  CHECK(c.ranges[0][0].end.str() == "198.51.100.20");
  CHECK(c.ranges[0][0].gateway.str() == "198.51.100.254");
  REQUIRE(c.ranges[1].size() == 2);
  CHECK(c.ranges[1][1].start.str() == "192.0.2.129");
  CHECK(c.ranges[1][1].end.str() == "192.0.2.254");
  REQUIRE(c.routes.size() == 2);
  CHECK(c.routes[0].dst.str() == "0.0.0.0/0");
  CHECK_FALSE(c.routes[0].gw.has_value());
  CHECK(c.routes[1].gw->str() == "198.51.100.254");
  CHECK(c.data_dir == "/tmp/x");
  CHECK(c.resolv_conf == "/etc/r.conf");
}

TEST_CASE("host-local: every bad field is named") {
  const std::string h = R"({"type":"host-local",)";
  expect_invalid(h + R"("ranges":[[{"rangeStart":"192.0.2.5"}]]})", {"ipam.ranges[0][0].subnet", "missing"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0"}]]})", {"ipam.ranges[0][0].subnet", "192.0.2.0"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.300/24"}]]})", {"ipam.ranges[0][0].subnet", "192.0.2.300"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.5/24"}]]})", {"ipam.ranges[0][0].subnet", "host bits", "192.0.2.0/24"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/31"}]]})", {"ipam.ranges[0][0].subnet", "too small"});
  expect_invalid(h + R"("ranges":[[{"subnet":"2001:db8::/127"}]]})", {"ipam.ranges[0][0].subnet", "too small"});
  expect_invalid(h + R"("ranges":[[{"subnet":42}]]})", {"ipam.ranges[0][0].subnet", "string"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24"},{"subnet":"198.51.100.0/24","rangeStart":"192.0.2.9"}]]})",
                 {"ipam.ranges[0][1].rangeStart", "192.0.2.9", "not in subnet 198.51.100.0/24"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24","rangeEnd":"2001:db8::1"}]]})",
                 {"ipam.ranges[0][0].rangeEnd", "family"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24","rangeEnd":"nope"}]]})", {"ipam.ranges[0][0].rangeEnd", "nope"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24","gateway":"198.51.100.1"}]]})",
                 {"ipam.ranges[0][0].gateway", "198.51.100.1"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24","rangeStart":"192.0.2.20","rangeEnd":"192.0.2.10"}]]})",
                 {"ipam.ranges[0][0].rangeStart 192.0.2.20", "after", "rangeEnd 192.0.2.10"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24"},{"subnet":"2001:db8::/64"}]]})",
                 {"ipam.ranges[0]", "mixes IPv4 and IPv6"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24"},{"subnet":"192.0.2.0/25"}]]})",
                 {"ipam.ranges[0][0]", "ipam.ranges[0][1]", "overlap"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24","rangeEnd":"192.0.2.100"},
                                    {"subnet":"192.0.2.0/24","rangeStart":"192.0.2.100"}]]})",
                 {"overlap"});
  expect_invalid(h + R"("ranges":[[{"subnet":"192.0.2.0/24"}],[{"subnet":"192.0.2.128/25"}]]})",
                 {"range set 0", "range set 1", "overlaps"});
  expect_invalid(h + R"("ranges":[[]]})", {"ipam.ranges[0]", "empty"});
  expect_invalid(h + R"("ranges":[{"subnet":"192.0.2.0/24"}]})", {"ipam.ranges[0]", "array"});
  expect_invalid(h + R"("ranges":{}})", {"ipam.ranges", "array"});
  expect_invalid(h + R"("dataDir":"/x"})", {"no ranges"});
  expect_invalid(h + R"("rangeStart":"192.0.2.4","ranges":[[{"subnet":"192.0.2.0/24"}]]})", {"ipam.rangeStart", "ipam.subnet"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","gateway":"192.0.3.1"})", {"ipam.gateway", "192.0.3.1"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","routes":[{"dst":"bad"}]})", {"ipam.routes[0].dst", "bad"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","routes":[{"gw":"192.0.2.1"}]})", {"ipam.routes[0].dst", "missing"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"192.0.2.1"}]})",
                 {"ipam.routes[1].gw", "family"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","routes":[{"dst":"0.0.0.0/0","mtu":"x"}]})", {"ipam.routes[0].mtu"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","dataDir":7})", {"ipam.dataDir"});
  expect_invalid(h + R"("subnet":"192.0.2.0/24","resolvConf":[]})", {"ipam.resolvConf"});
}

TEST_CASE("make: type dispatch and errors") {
  CHECK_FALSE(make_error(R"({"type":"host-local","subnet":"192.0.2.0/24"})").has_value());
  CHECK_FALSE(make_error(R"({"type":"static"})").has_value());
  expect_invalid(R"({"subnet":"192.0.2.0/24"})", {"ipam.type", "missing"});
  expect_invalid(R"({"type":"dhcp"})", {"ipam.type", "dhcp"});
  expect_invalid(R"({"type":3})", {"ipam.type"});
  expect_invalid(R"([1])", {"ipam must be an object"});
}

TEST_CASE("iteration: round robin after last_reserved_ip across ranges, one full turn") {
  auto c = config(R"({"type":"host-local","ranges":[[
      {"subnet":"192.0.2.0/29","rangeStart":"192.0.2.2","rangeEnd":"192.0.2.4"},
      {"subnet":"198.51.100.0/29"}]]})");
  const RangeSet& set = c.ranges[0];
  const std::vector<std::string> from_start = {"192.0.2.2", "192.0.2.3", "192.0.2.4", "198.51.100.2",
                                               "198.51.100.3", "198.51.100.4", "198.51.100.5", "198.51.100.6"};
  CHECK(walk(set) == from_start);
  // After 192.0.2.3: continue at .4, then the next range, wrap, and end with .3 itself.
  CHECK(walk(set, ip("192.0.2.3")) ==
        std::vector<std::string>{"192.0.2.4", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5",
                                 "198.51.100.6", "192.0.2.2", "192.0.2.3"});
  // Last reserved at the end of the last range wraps to the first range.
  CHECK(walk(set, ip("198.51.100.6")) == from_start);
  // A last_reserved_ip outside the set (config changed) starts from the beginning.
  CHECK(walk(set, ip("203.0.113.9")) == from_start);
  CHECK(walk(set, ip("2001:db8::1")) == from_start);
}

TEST_CASE("iteration: the gateway is never a candidate") {
  auto c = config(R"({"type":"host-local","ranges":[[{"subnet":"192.0.2.0/29","gateway":"192.0.2.3"}]]})");
  CHECK(walk(c.ranges[0]) == std::vector<std::string>{"192.0.2.1", "192.0.2.2", "192.0.2.4", "192.0.2.5", "192.0.2.6"});
  // Default gateway .1 equals the default rangeStart: skipped, like the reference.
  auto d = config(R"({"type":"host-local","subnet":"192.0.2.0/30"})");
  CHECK(walk(d.ranges[0]) == std::vector<std::string>{"192.0.2.2"});
  CHECK(walk(d.ranges[0], ip("192.0.2.2")) == std::vector<std::string>{"192.0.2.2"});
  CHECK_FALSE(d.ranges[0][0].allocatable(ip("192.0.2.1")));
  CHECK(d.ranges[0][0].allocatable(ip("192.0.2.2")));
}

TEST_CASE("iteration: IPv4 network and broadcast addresses are excluded, IPv6 ones are not") {
  auto c = config(R"({"type":"host-local","ranges":[[{"subnet":"192.0.2.0/29","rangeStart":"192.0.2.0",
      "rangeEnd":"192.0.2.7","gateway":"192.0.2.6"}]]})");
  const Range& r = c.ranges[0][0];
  CHECK_FALSE(r.allocatable(ip("192.0.2.0")));
  CHECK_FALSE(r.allocatable(ip("192.0.2.7")));
  CHECK(walk(c.ranges[0]) == std::vector<std::string>{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"});
  auto d = config(R"({"type":"host-local","ranges":[[{"subnet":"2001:db8::/126","rangeStart":"2001:db8::"}]]})");
  CHECK(d.ranges[0][0].end.str() == "2001:db8::3");
  CHECK(walk(d.ranges[0]) == std::vector<std::string>{"2001:db8::", "2001:db8::2", "2001:db8::3"});
  CHECK_FALSE(d.ranges[0][0].allocatable(ip("2001:db8::1")));  // the gateway
  CHECK_FALSE(d.ranges[0][0].allocatable(ip("192.0.2.1")));    // other family
}

TEST_CASE("range_for and range_set_str") {
  auto c = config(R"({"type":"host-local","ranges":[[{"subnet":"192.0.2.0/24","rangeStart":"192.0.2.10","rangeEnd":"192.0.2.20"},
      {"subnet":"198.51.100.0/24"}]]})");
  const RangeSet& s = c.ranges[0];
  CHECK(range_for(s, ip("192.0.2.15")) == std::optional<size_t>(0));
  CHECK_FALSE(range_for(s, ip("192.0.2.21")).has_value());
  CHECK(range_for(s, ip("198.51.100.1")) == std::optional<size_t>(1));
  CHECK(range_set_str(s) == "192.0.2.0/24 (192.0.2.10-192.0.2.20), 198.51.100.0/24 (198.51.100.1-198.51.100.254)");
}

TEST_CASE("resolvConf: nameserver/domain/search/options as the reference parses them") {
  char path[] = "/tmp/plumb-resolv-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "# comment\n; also comment\nnameserver 192.0.2.53\n  nameserver 2001:db8::53 ignored\n"
         "domain example.test\nsearch a.test b.test\nsearch c.test\noptions ndots:2 edns0\nsortlist x\nnameserver\n";
  }
  auto dns = parse_resolv_conf(path);
  unlink(path);
  REQUIRE(dns.has_value());
  CHECK(dns->nameservers == std::vector<std::string>{"192.0.2.53", "2001:db8::53"});
  CHECK(dns->domain == "example.test");
  CHECK(dns->search == std::vector<std::string>{"a.test", "b.test", "c.test"});
  CHECK(dns->options == std::vector<std::string>{"ndots:2", "edns0"});
  auto missing = parse_resolv_conf("/nonexistent/plumb/resolv.conf");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().cni_code == cni_code::kIo);
  CHECK(missing.error().msg.find("/nonexistent/plumb/resolv.conf") != std::string::npos);
}

TEST_CASE("network names that would leave dataDir are rejected") {
  for (const char* bad : {"", ".", "..", "a/b", "../x", "/abs"}) {
    auto st = detail::validate_network_name(bad);
    INFO("name: ", bad);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().cni_code == cni_code::kInvalidConfig);
  }
  CHECK(detail::validate_network_name("net-1.a_b").has_value());
  CHECK(detail::validate_network_name("...").has_value());
}

TEST_CASE("static: addresses, routes and dns from the config") {
  json::Document d = doc(R"({"type":"static","addresses":[{"address":"192.0.2.5/24","gateway":"192.0.2.1"},
      {"address":"2001:db8::5/64"}],"routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"}],
      "dns":{"nameservers":["192.0.2.53"],"domain":"example.test","search":["example.test"],"options":["ndots:1"]}})");
  auto ipam = make(d);
  REQUIRE(ipam.has_value());
  Request req{"c1", "eth0", "net1", &d, nullptr, nullptr, {}};
  auto r = (*ipam)->add(req);
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 2);
  CHECK(r->ips[0].address.str() == "192.0.2.5/24");  // host bits kept: an interface address
  CHECK(r->ips[0].gateway->str() == "192.0.2.1");
  CHECK_FALSE(r->ips[0].interface.has_value());
  CHECK(r->ips[1].address.str() == "2001:db8::5/64");
  CHECK_FALSE(r->ips[1].gateway.has_value());
  REQUIRE(r->routes.size() == 1);
  CHECK(r->routes[0].gw->str() == "192.0.2.1");
  CHECK(r->dns.nameservers == std::vector<std::string>{"192.0.2.53"});
  CHECK(r->dns.domain == "example.test");
  CHECK(r->dns.search == std::vector<std::string>{"example.test"});
  CHECK(r->dns.options == std::vector<std::string>{"ndots:1"});
  CHECK((*ipam)->del(req).has_value());
  CHECK((*ipam)->check(req, *r).has_value());
  cni::CniResult partial = *r;
  partial.ips.pop_back();
  auto st = (*ipam)->check(req, partial);
  REQUIRE_FALSE(st.has_value());
  CHECK(st.error().msg.find("2001:db8::5/64") != std::string::npos);
}

TEST_CASE("static: bad fields are named") {
  expect_invalid(R"({"type":"static","addresses":[{"gateway":"192.0.2.1"}]})", {"ipam.addresses[0].address", "missing"});
  expect_invalid(R"({"type":"static","addresses":[{"address":"192.0.2.5"}]})", {"ipam.addresses[0].address", "CIDR"});
  expect_invalid(R"({"type":"static","addresses":[{"address":"192.0.2.5/24","gateway":"x"}]})",
                 {"ipam.addresses[0].gateway", "\"x\""});
  expect_invalid(R"({"type":"static","addresses":[{"address":"192.0.2.5/24"},{"address":"2001:db8::5/64","gateway":"192.0.2.1"}]})",
                 {"ipam.addresses[1].gateway", "family"});
  expect_invalid(R"({"type":"static","addresses":{}})", {"ipam.addresses", "array"});
  expect_invalid(R"({"type":"static","addresses":["192.0.2.5/24"]})", {"ipam.addresses[0]", "object"});
  expect_invalid(R"({"type":"static","dns":{"nameservers":"192.0.2.53"}})", {"ipam.dns.nameservers"});
  expect_invalid(R"({"type":"static","dns":[]})", {"ipam.dns"});
  expect_invalid(R"({"type":"static","routes":[{"dst":"192.0.2.0/33"}]})", {"ipam.routes[0].dst"});
}

TEST_CASE("static: CNI_ARGS IP/GATEWAY append, args.cni.ips and runtimeConfig.ips replace (reference order)") {
  json::Document d = doc(R"({"type":"static","addresses":[{"address":"192.0.2.5/24","gateway":"192.0.2.1"}]})");
  auto ipam = make(d);
  REQUIRE(ipam.has_value());

  Request env{"c1", "eth0", "net1", &d, nullptr, nullptr,
              {{"IgnoreUnknown", "1"}, {"IP", "198.51.100.7/24, 2001:db8::7/64"}, {"GATEWAY", "198.51.100.1"}}};
  auto r = (*ipam)->add(env);
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 3);
  CHECK(r->ips[0].address.str() == "192.0.2.5/24");
  CHECK(r->ips[0].gateway->str() == "192.0.2.1");
  CHECK(r->ips[1].address.str() == "198.51.100.7/24");
  CHECK(r->ips[1].gateway->str() == "198.51.100.1");
  CHECK(r->ips[2].address.str() == "2001:db8::7/64");
  CHECK_FALSE(r->ips[2].gateway.has_value());

  json::Document args = doc(R"({"cni":{"ips":["203.0.113.9/24"]}})");
  Request a{"c1", "eth0", "net1", &d, nullptr, &args, {{"IP", "198.51.100.7/24"}}};
  r = (*ipam)->add(a);
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 1);
  CHECK(r->ips[0].address.str() == "203.0.113.9/24");

  json::Document rc = doc(R"({"IPs":["198.51.100.9/24"]})");  // keys match case-insensitively
  Request both{"c1", "eth0", "net1", &d, &rc, &args, {}};
  r = (*ipam)->add(both);
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 1);
  CHECK(r->ips[0].address.str() == "198.51.100.9/24");

  Request bad{"c1", "eth0", "net1", &d, nullptr, nullptr, {{"IP", "198.51.100.7"}}};
  auto e = (*ipam)->add(bad);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().cni_code == cni_code::kInvalidConfig);
  CHECK(e.error().msg.find("CNI_ARGS IP") != std::string::npos);
  CHECK(e.error().msg.find("CIDR") != std::string::npos);

  json::Document rcbad = doc(R"({"ips":["198.51.100.9"]})");
  Request bad2{"c1", "eth0", "net1", &d, &rcbad, nullptr, {}};
  e = (*ipam)->add(bad2);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().msg.find("runtimeConfig.ips[0]") != std::string::npos);
}
