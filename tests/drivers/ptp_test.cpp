// The ptp driver end to end: the real plumb binary in a private node, the reference's address and
// route layout read back with `ip -j` in the pod and the node, traffic between two pods through
// the node (bounded pings), ipMasq elements in nftables, and DEL leaving nothing.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <tuple>

#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;
const auto links = plumb::test::link_names;

namespace {

std::string ptp_nad(const std::string& extra, const std::string& ipam_dir) {
  return R"({"cniVersion": "1.0.0", "type": "ptp", )" + extra + R"("capabilities": {"mac": true},
   "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(",
            "ranges": [[{"subnet": "198.51.100.0/24"}], [{"subnet": "2001:db8:7::/64"}]]}})";
}

/// (dst, gateway, prefsrc, scope) of every route of `dev` in namespace `ns` ("" = the node).
std::set<std::string> routes(const std::string& ns, const std::string& family, const std::string& dev) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + family + " route show dev " + dev);
  std::set<std::string> out;
  for (auto& r : d.GetArray()) {
    std::string s = r["dst"].GetString();
    if (r.HasMember("gateway")) s += std::string(" via ") + r["gateway"].GetString();
    if (r.HasMember("prefsrc")) s += std::string(" src ") + r["prefsrc"].GetString();
    if (r.HasMember("scope")) s += std::string(" scope ") + r["scope"].GetString();
    out.insert(s);
  }
  return out;
}

std::string addr_of(const std::string& ns, const std::string& dev, const std::string& family) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "addr show dev " + dev);
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (a["family"].GetString() == family && std::string(a["scope"].GetString()) == "global") {
        return std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt());
      }
    }
  }
  return "";
}

/// The pod side of pod-a's p0: a veth with the MTU and the MAC of the "mac" capability, the /24
/// address, no connected route but gw/32 scope link and the subnet via the gateway, both from the
/// pod address. Returns the pod's IPv4 and IPv6 address and the ifindex of its peer in the node.
std::tuple<std::string, std::string, int> check_pod_side() {
  auto p0 = ip_json("-d -n pod-a link show dev p0");
  CHECK(std::string(p0[0]["linkinfo"]["info_kind"].GetString()) == "veth");
  CHECK(p0[0]["mtu"].GetInt() == 1400);
  CHECK(std::string(p0[0]["address"].GetString()) == "02:00:00:00:0b:01");
  std::string a4 = addr_of("pod-a", "p0", "inet"), a6 = addr_of("pod-a", "p0", "inet6");
  REQUIRE(a4.rfind("198.51.100.", 0) == 0);
  CHECK(a4.substr(a4.find('/')) == "/24");
  REQUIRE(a6.rfind("2001:db8:7::", 0) == 0);
  std::string ip4 = a4.substr(0, a4.find('/')), ip6 = a6.substr(0, a6.find('/'));
  CHECK(routes("pod-a", "-4", "p0") ==
        std::set<std::string>{"198.51.100.1 src " + ip4 + " scope link", "198.51.100.0/24 via 198.51.100.1 src " + ip4});
  auto r6 = routes("pod-a", "-6", "p0");
  INFO("pod-a IPv6 routes of p0: ", [&] {
    std::string t;
    for (auto& r : r6) t += r + "; ";
    return t;
  }());
  CHECK(r6.count("2001:db8:7::1 src " + ip6 + " scope link") + r6.count("2001:db8:7::1 src " + ip6) == 1);
  CHECK(r6.count("2001:db8:7::/64 via 2001:db8:7::1 src " + ip6) == 1);
  return {ip4, ip6, p0[0]["link_index"].GetInt()};
}

/// The node side: the host veth (ifindex `peer`, the pod end's peer) holds the gateways as /32 and
/// /128 and a scope-host route per pod address; forwarding is on; ipMasq: the pod's IPv4 address
/// is an element of plumb's masquerade map.
void check_node_side(PodFixture& fx, int peer, const std::string& ip4, const std::string& ip6) {
  std::string host;
  auto veths = ip_json("link show type veth");
  for (auto& l : veths.GetArray()) {
    if (l["ifindex"].GetInt() == peer) host = l["ifname"].GetString();
  }
  REQUIRE_FALSE(host.empty());
  rapidjson::Document st;
  st.Parse(fx.status_of("default", "pod-a").c_str());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["interface"].GetString()) == "p0");
  CHECK(std::string(st[1]["mac"].GetString()) == "02:00:00:00:0b:01");
  CHECK(addr_of("", host, "inet") == "198.51.100.1/32");
  CHECK(addr_of("", host, "inet6") == "2001:db8:7::1/128");
  CHECK(routes("", "-4", host).count(ip4 + " scope host") == 1);
  CHECK(routes("", "-6", host).count(ip6) == 1);
  Proc fwd = sh("cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv6/conf/all/forwarding");
  CHECK(fwd.out == "1\n1\n");
  Proc nft = sh("nft list map inet plumb masq4");
  CHECK(nft.out.find(ip4) != std::string::npos);
}

/// Traffic both ways through the node, v4 and v6, bounded: pod-a pings pod-b.
void check_traffic() {
  std::string b4 = addr_of("pod-b", "p0", "inet"), b6 = addr_of("pod-b", "p0", "inet6");
  Proc ping = sh("ip netns exec pod-a ping -c 2 -W 2 " + b4.substr(0, b4.find('/')));
  INFO("ping: ", ping.out, ping.err);
  CHECK(ping.exit_code == 0);
  Proc ping6 = sh("ip netns exec pod-a ping -6 -c 2 -W 2 " + b6.substr(0, b6.find('/')));
  INFO("ping6: ", ping6.out, ping6.err);
  CHECK(ping6.exit_code == 0);
}

/// CHECK of pod-a (ADD result `added`) passes, then notices a missing subnet route.
void check_check(PodFixture& fx, const std::string& pa, const std::string& added) {
  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + added));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(sh("ip -n pod-a route del 198.51.100.0/24 via 198.51.100.1 dev p0").exit_code == 0);
  Proc bad = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + added));
  CHECK(bad.exit_code != 0);
}

}  // namespace

TEST_CASE(
    "ptp: two pods get veths with the reference's /32 layout, reach each other through the node, DEL removes all") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "p2p", ptp_nad(R"("mtu": 1400, "ipMasq": true, )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a"), pb = node.add_netns("pod-b");
  fx.add_pod("default", "pod-a", R"([{"name": "p2p", "interface": "p0", "mac": "02:00:00:00:0b:01"}])");
  fx.add_pod("default", "pod-b", R"([{"name": "p2p", "interface": "p0"}])");
  auto node_links_before = links("");

  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO("pod-a: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  Proc b = fx.run("ADD", "ctr-b", pb, "default", "pod-b", fx.config());
  INFO("pod-b: ", b.out, b.err);
  REQUIRE(b.exit_code == 0);

  auto [ip4, ip6, peer] = check_pod_side();
  check_node_side(fx, peer, ip4, ip6);
  check_traffic();
  check_check(fx, pa, a.out);

  for (auto [cid, name, path] : {std::tuple{"ctr-a", "pod-a", pa}, std::tuple{"ctr-b", "pod-b", pb}}) {
    Proc del = fx.run("DEL", cid, path, "default", name, fx.config());
    INFO("del ", cid, ": ", del.out, del.err);
    CHECK(del.exit_code == 0);
    CHECK(links(name) == std::set<std::string>{"lo"});
  }
  auto node_links_after = links("");
  node_links_after.erase("plumb0");  // the default network's shared bridge stays, as with the reference
  CHECK(node_links_after == node_links_before);
  CHECK(sh("nft list map inet plumb masq4").out.find(ip4) == std::string::npos);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("ptp: an IPAM result without a gateway fails the ADD and leaves nothing") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "p2p", R"({"cniVersion": "1.0.0", "type": "ptp",
     "ipam": {"type": "static", "addresses": [{"address": "192.0.2.10/24"}]}})");
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "p2p");
  auto before = links("");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("gateway") != std::string::npos);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
  auto after = links("");
  after.erase("plumb0");
  CHECK(after == before);
}

TEST_CASE("ptp: a config without ipam is refused while parsing") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "p2p", R"({"cniVersion": "1.0.0", "type": "ptp", "mtu": 1400})");
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "p2p");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("ipam") != std::string::npos);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
}
