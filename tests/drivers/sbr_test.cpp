// The sbr driver end to end: a bridge attachment chained with sbr in a private node; the rules,
// the per-address table and the emptied main table read back with `ip -j`, the kernel's routing
// decisions (`ip route get` with and without the pod address as source), traffic from the pod
// address (bounded ping), and DEL removing the rules.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

std::string sbr_nad(const std::string& sbr_keys, const std::string& ipam_dir) {
  return R"({"cniVersion": "1.0.0", "name": "sb", "plugins": [
    {"type": "bridge", "bridge": "br-sb", "isGateway": true,
     "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]],
              "routes": [{"dst": "192.0.2.0/24"}]}},
    {"type": "sbr")" + sbr_keys + R"(}]})";
}

std::string pod_ip(const std::string& ns, const std::string& dev) {
  auto d = ip_json("-n " + ns + " -4 addr show dev " + dev);
  return d[0]["addr_info"][0]["local"].GetString();
}

/// `ip -j route get ...` in the pod: the device and table of the kernel's choice.
std::string route_get(const std::string& ns, const std::string& args) {
  auto d = ip_json("-n " + ns + " route get " + args);
  std::string s = d[0]["dev"].GetString();
  if (d[0].HasMember("table")) s += std::string(" table ") + d[0]["table"].GetString();
  return s;
}

}  // namespace

TEST_CASE("sbr: the pod address gets a rule and table 100 with the interface's routes; the main table loses them") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "sb", sbr_nad("", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "sb");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  const std::string ip = pod_ip("pod-a", "net1");

  // The rule: from <ip> lookup 100.
  auto rules = ip_json("-n pod-a -4 rule show");
  bool rule = false;
  for (auto& r : rules.GetArray()) {
    rule |= r.HasMember("src") && std::string(r["src"].GetString()) == ip && std::string(r["table"].GetString()) == "100";
  }
  CHECK(rule);
  // Table 100: default via the gateway, the subnet and the IPAM route; main: nothing of net1.
  auto t100 = ip_json("-n pod-a -4 route show table 100");
  std::set<std::string> in100;
  for (auto& r : t100.GetArray()) in100.insert(std::string(r["dst"].GetString()) + " " + r["dev"].GetString());
  CHECK(in100 == std::set<std::string>{"default net1", "198.51.100.0/24 net1", "192.0.2.0/24 net1"});
  CHECK(ip_json("-n pod-a -4 route show dev net1").Size() == 0);

  // Routing decisions: from the pod address through net1 by table 100; without a source the main
  // table's default (eth0) is used.
  CHECK(route_get("pod-a", "192.0.2.9 from " + ip) == "net1 table 100");
  CHECK(route_get("pod-a", "192.0.2.9") == "eth0");
  Proc ping = sh("ip netns exec pod-a ping -c 2 -W 2 -I " + ip + " 198.51.100.1");
  INFO("ping: ", ping.out, ping.err);
  CHECK(ping.exit_code == 0);

  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);

  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(sh("ip -n pod-a -4 rule show").out.find(ip) == std::string::npos);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("sbr: a second pod address table is the next free one; a static table only adds rules; gateways override") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  // A table already used by a route in the pod: sbr skips it.
  REQUIRE(sh("ip -n pod-a route add blackhole 192.0.2.0/24 table 100").exit_code == 0);
  fx.add_nad("default", "sb", sbr_nad(R"(, "gateways": ["198.51.100.254"])", fx.ipam_dir()));
  fx.add_nad("default", "st", R"({"cniVersion": "1.0.0", "name": "st", "plugins": [
    {"type": "bridge", "bridge": "br-st", "ipam": {"type": "static", "addresses": [{"address": "192.0.2.77/24"}]}},
    {"type": "sbr", "table": 4242}]})");
  fx.add_pod("default", "pod-a", "sb,st");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(sh("ip -n pod-a -4 route show table 101").out.find("default via 198.51.100.254 dev net1") != std::string::npos);
  CHECK(sh("ip -n pod-a -4 rule show").out.find("from 192.0.2.77 lookup 4242") != std::string::npos);
  // With a static table the interface's routes stay in the main table.
  CHECK(sh("ip -n pod-a -4 route show dev net2").out.find("192.0.2.0/24") != std::string::npos);
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  Proc left = sh("ip -n pod-a -4 rule show");
  CHECK(left.out.find("4242") == std::string::npos);
  CHECK(left.out.find("lookup 101") == std::string::npos);
}

TEST_CASE("sbr: three gateways are refused while parsing") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "sb", sbr_nad(R"(, "gateways": ["192.0.2.1", "2001:db8::1", "192.0.2.2"])", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "sb");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("gateways") != std::string::npos);
}

TEST_CASE("sbr: a failure later in the chain rolls sbr back: no rule, no table left in the pod") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "sb", R"({"cniVersion": "1.0.0", "name": "sb", "plugins": [
    {"type": "bridge", "bridge": "br-sb", "isGateway": true,
     "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}},
    {"type": "sbr"},
    {"type": "tuning", "sysctl": {"net.ipv4.conf.nosuch0.arp_ignore": "1"}}]})");
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "sb");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(sh("ip -n pod-a -4 rule show").out.find("lookup 100") == std::string::npos);
  CHECK(sh("ip -n pod-a -4 route show table 100").out.empty());
  CHECK(sh("ip -n pod-a link show").out.find("net1") == std::string::npos);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}
