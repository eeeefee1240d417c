// The network-status annotation (NPWG v1.3 section 5) built from CNI results.
#include <doctest/doctest.h>

#include <string>

#include "cni-entry/npwg/nad.hpp"

using namespace plumb;

namespace {

cni::CniResult decode(const std::string& text, const std::string& version) {
  auto d = json::parse(text, "test");
  REQUIRE(d.has_value());
  auto r = cni::decode_result(*d, version);
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  return *r;
}

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test");
  REQUIRE(d.has_value());
  return std::move(*d);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("5.3.2-5.3.5: interface, mac and mtu from the first sandbox interface, its ips without prefix") {
  auto r = decode(R"({"cniVersion":"1.1.0",
    "interfaces":[{"name":"veth1234","mac":"02:00:00:00:00:01"},
                  {"name":"net1","mac":"02:00:00:00:00:02","mtu":1450,"sandbox":"/run/netns/pod1"},
                  {"name":"net2","mac":"02:00:00:00:00:03","sandbox":"/run/netns/pod1"}],
    "ips":[{"interface":0,"address":"203.0.113.1/24"},
           {"interface":1,"address":"192.0.2.5/24","gateway":"192.0.2.1"},
           {"interface":2,"address":"198.51.100.9/24"},
           {"interface":1,"address":"2001:db8::5/64"},
           {"address":"198.51.100.200/24"}],
    "dns":{"nameservers":["192.0.2.53"],"search":["example.com"]}})",
                  "1.1.0");
  auto e = nad::status_from_result("team-a/net-a", r, "ignored0", false);
  CHECK(e.name == "team-a/net-a");
  CHECK(e.interface == "net1");
  CHECK(e.mac == "02:00:00:00:00:02");
  CHECK(e.mtu_bytes == 1450u);
  CHECK(e.ips == std::vector<std::string>{"192.0.2.5", "2001:db8::5"});  // not the host side's, not net2's
  CHECK_FALSE(e.is_default);
  CHECK(e.dns.nameservers == std::vector<std::string>{"192.0.2.53"});
  CHECK(e.dns.search == std::vector<std::string>{"example.com"});
  CHECK(nad::encode_network_status({}) == "[]");
}

TEST_CASE("5.3.3.1 rule 2: without a sandbox interface, the ips that name no interface") {
  auto r = decode(R"({"cniVersion":"0.4.0",
    "interfaces":[{"name":"host0","mac":"02:00:00:00:00:01"}],
    "ips":[{"interface":0,"address":"203.0.113.1/24"},{"address":"192.0.2.5/24"},{"interface":-1,"address":"2001:db8::7/64"}]})",
                  "0.4.0");
  auto e = nad::status_from_result("net-x", r, "net1", false);
  CHECK(e.interface.empty());  // none in the sandbox
  CHECK(e.mac.empty());
  CHECK(e.ips == std::vector<std::string>{"192.0.2.5", "2001:db8::7"});
  std::vector<nad::StatusEntry> v;
  v.push_back(std::move(e));
  CHECK(nad::encode_network_status(v) == R"([{"name":"net-x","ips":["192.0.2.5","2001:db8::7"],"default":false}])");
}

TEST_CASE("5.3.2.1: a 0.2.0 result (no interfaces) uses CNI_IFNAME; ips from ip4 and ip6") {
  auto r = decode(R"({"cniVersion":"0.2.0","ip4":{"ip":"192.0.2.9/24","gateway":"192.0.2.1"},
                      "ip6":{"ip":"2001:db8::9/64"},"dns":{}})",
                  "0.2.0");
  auto e = nad::status_from_result("ns/old-net", r, "net3", false);
  CHECK(e.interface == "net3");
  CHECK(e.mac.empty());
  CHECK(e.ips == std::vector<std::string>{"192.0.2.9", "2001:db8::9"});
  CHECK(e.dns.empty());
}

TEST_CASE("an IPAM-shaped 1.0.0 result without interfaces also falls back to CNI_IFNAME") {
  auto r = decode(R"({"cniVersion":"1.0.0","ips":[{"address":"192.0.2.4/24"}]})", "1.0.0");
  auto e = nad::status_from_result("ns/n", r, "net7", false);
  CHECK(e.interface == "net7");
  CHECK(e.ips == std::vector<std::string>{"192.0.2.4"});
}

TEST_CASE("5.4: exact annotation text for a pod with three attachments") {
  std::vector<nad::StatusEntry> entries;

  auto def = nad::status_from_result(
      "cluster-wide-default",
      decode(R"({"cniVersion":"1.0.0","interfaces":[{"name":"cni0"},{"name":"eth0","mac":"02:11:22:33:44:54","sandbox":"/run/netns/p"}],
                "ips":[{"interface":1,"address":"192.0.2.2/24","gateway":"192.0.2.1"},{"interface":1,"address":"2001:db8::2230/32"}]})",
             "1.0.0"),
      "eth0", true);
  entries.push_back(std::move(def));

  auto b = nad::status_from_result(
      "namespace-b/some-network",
      decode(R"({"cniVersion":"1.1.0","interfaces":[{"name":"eth1","mac":"02:11:22:33:44:55","mtu":1500,"sandbox":"/run/netns/p"}],
                "ips":[{"interface":0,"address":"198.51.100.2/24"},{"interface":0,"address":"2001:db8::2234/32"}],
                "dns":{"nameservers":["192.0.2.1","2001:db8:4860::8888"],"search":["eng.example.com","example.com"]}})",
             "1.1.0"),
      "eth1", false);
  b.default_route = {"198.51.100.1"};  // the element asked for "default-route"
  entries.push_back(std::move(b));

  auto c = nad::status_from_result(
      "namespace-b/sriov-network-a",
      decode(R"({"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/run/netns/p"}]})", "1.0.0"), "net1", false);
  c.device_info = doc(R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5","pf-pci-address":"0000:18:00.0"}})");
  entries.push_back(std::move(c));

  REQUIRE(nad::check_network_status(entries).has_value());
  CHECK(nad::encode_network_status(entries) ==
        R"([{"name":"cluster-wide-default","interface":"eth0","ips":["192.0.2.2","2001:db8::2230"],"mac":"02:11:22:33:44:54","default":true},)"
        R"({"name":"namespace-b/some-network","interface":"eth1","ips":["198.51.100.2","2001:db8::2234"],"mac":"02:11:22:33:44:55","mtu":1500,"default":false,)"
        R"("dns":{"nameservers":["192.0.2.1","2001:db8:4860::8888"],"search":["eng.example.com","example.com"]},"default-route":["198.51.100.1"]},)"
        R"({"name":"namespace-b/sriov-network-a","interface":"net1","default":false,)"
        R"("device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5","pf-pci-address":"0000:18:00.0"}}}])");
}

TEST_CASE("5.3: empty keys omitted, default always present, mac and mtu only with interface") {
  nad::StatusEntry e;
  e.name = "ns/n";
  e.mac = "02:00:00:00:00:09";  // no interface: must not appear (5.3.4)
  e.mtu_bytes = 9000;
  e.dns.domain = "example.org";
  std::vector<nad::StatusEntry> v;
  v.push_back(std::move(e));
  CHECK(nad::encode_network_status(v) == R"([{"name":"ns/n","default":false,"dns":{"domain":"example.org"}}])");
}

TEST_CASE("5.2 / 5.3.6: exactly one default entry, every entry named") {
  auto mk = [](std::string name, bool def) {
    nad::StatusEntry e;
    e.name = std::move(name);
    e.is_default = def;
    return e;
  };
  std::vector<nad::StatusEntry> none;
  none.push_back(mk("a/b", false));
  auto r = nad::check_network_status(none);
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "0 entries"));

  std::vector<nad::StatusEntry> two;
  two.push_back(mk("default-net", true));
  two.push_back(mk("a/b", true));
  r = nad::check_network_status(two);
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "2 entries"));

  std::vector<nad::StatusEntry> unnamed;
  unnamed.push_back(mk("default-net", true));
  unnamed.push_back(mk("", false));
  r = nad::check_network_status(unnamed);
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "entry 2"));

  std::vector<nad::StatusEntry> good;
  good.push_back(mk("a/b", false));
  good.push_back(mk("default-net", true));  // 5.2: the default entry may be anywhere
  CHECK(nad::check_network_status(good).has_value());
}

TEST_CASE("Multus's \"gateway\": the gateways of the result's default routes, after device-info") {
  auto r = decode(R"({"interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"address":"192.0.2.5/24","interface":0}],
    "routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"198.51.100.0/24","gw":"192.0.2.2"},{"dst":"::/0","gw":"2001:db8::1"}]})",
                  "1.0.0");
  auto e = nad::status_from_result("default-net", r, "eth0", true);
  CHECK(e.gateway == std::vector<std::string>{"192.0.2.1", "2001:db8::1"});
  e.device_info = doc(R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2"}})");
  std::vector<nad::StatusEntry> one;
  one.push_back(std::move(e));
  CHECK(nad::encode_network_status(one) ==
        R"([{"name":"default-net","interface":"eth0","ips":["192.0.2.5"],"default":true,)"
        R"("device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2"}},"gateway":["192.0.2.1","2001:db8::1"]}])");
  auto none = nad::status_from_result("n", decode(R"({"ips":[{"address":"192.0.2.5/24"}]})", "1.0.0"), "net1", false);
  CHECK(none.gateway.empty());
  std::vector<nad::StatusEntry> plain;
  plain.push_back(std::move(none));
  CHECK(nad::encode_network_status(plain).find("gateway") == std::string::npos);
}
