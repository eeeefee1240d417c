// The macvlan driver end to end: the real plumb binary in a private node, kernel state read back
// with iproute2 (`ip -j`) and /proc/sys inside the pod namespace, traffic with bounded pings.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "engine/base/ip.hpp"
#include "tests/support/packet_listener.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::address_files;
using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::pod_sysctl;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

/// A veth pair in the node, both ends up: `name` serves as the macvlan master.
void add_master(const std::string& name, int mtu = 1500) {
  REQUIRE(sh("ip link add " + name + " mtu " + std::to_string(mtu) + " type veth peer name " + name + "p").exit_code == 0);
  REQUIRE(sh("ip link set " + name + " up && ip link set " + name + "p up").exit_code == 0);
}

std::string macvlan_nad(const std::string& extra, const std::string& ipam_dir, const std::string& subnet = "198.51.100.0/24") {
  return R"({"cniVersion": "1.0.0", "type": "macvlan", )" + extra + R"("capabilities": {"mac": true},
   "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

/// `ip -d -j link show dev` of one link in a pod namespace.
rapidjson::Document link_detail(const std::string& ns, const std::string& dev) {
  auto d = ip_json("-d -n " + ns + " link show dev " + dev);
  REQUIRE(d.IsArray());
  REQUIRE(d.Size() == 1);
  rapidjson::Document one;
  one.CopyFrom(d[0], one.GetAllocator());
  return one;
}

std::string first_addr(const std::string& ns, const std::string& dev, const char* family = "inet") {
  auto d = ip_json("-n " + ns + " addr show dev " + dev);
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (std::string(a["family"].GetString()) == family && std::string(a["scope"].GetString()) == "global") {
        return a["local"].GetString();
      }
    }
  }
  return "";
}

bool no_state(const PodFixture& fx) { return PodFixture::files_under(fx.state() + "/containers").empty(); }

}  // namespace

TEST_CASE("macvlan: two pods on one master get macvlans in bridge mode, reach each other, and DEL removes them") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", R"({"cniVersion": "1.0.0", "type": "macvlan", "master": "mst0", "mtu": 1400,
   "capabilities": {"mac": true},
   "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(",
            "ranges": [[{"subnet": "198.51.100.0/24"}], [{"subnet": "2001:db8:5::/64"}]]}})");
  std::string pa = node.add_netns("pod-a"), pb = node.add_netns("pod-b");
  fx.add_pod("default", "pod-a", R"([{"name": "mv", "interface": "mv0", "mac": "02:00:00:00:0a:01"}])");
  fx.add_pod("default", "pod-b", R"([{"name": "mv", "interface": "mv0"}])");

  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO("pod-a: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  Proc b = fx.run("ADD", "ctr-b", pb, "default", "pod-b", fx.config());
  INFO("pod-b: ", b.out, b.err);
  REQUIRE(b.exit_code == 0);

  // Kernel: a macvlan in bridge mode on mst0 under the requested name, MTU and MAC, up; no
  // temporary name left anywhere.
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "eth0", "mv0"});
  auto mv = link_detail("pod-a", "mv0");
  CHECK(std::string(mv["linkinfo"]["info_kind"].GetString()) == "macvlan");
  CHECK(std::string(mv["linkinfo"]["info_data"]["mode"].GetString()) == "bridge");
  CHECK(mv["mtu"].GetInt() == 1400);
  CHECK(std::string(mv["address"].GetString()) == "02:00:00:00:0a:01");
  CHECK(std::string(mv["operstate"].GetString()) != "DOWN");
  auto master = ip_json("link show dev mst0");
  CHECK(mv["link_index"].GetInt() == master[0]["ifindex"].GetInt());
  for (auto& l : link_names("")) CHECK(l.rfind("mvl", 0) != 0);
  // arp_notify always, ndisc_notify because the attachment has an IPv6 address.
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/mv0/arp_notify") == "1");
  CHECK(pod_sysctl("pod-a", "net/ipv6/conf/mv0/ndisc_notify") == "1");
  std::string ip_b = first_addr("pod-b", "mv0");
  REQUIRE(ip_b.rfind("198.51.100.", 0) == 0);
  CHECK(first_addr("pod-a", "mv0").rfind("198.51.100.", 0) == 0);
  CHECK(first_addr("pod-a", "mv0", "inet6").rfind("2001:db8:5:", 0) == 0);

  // The network-status reports the macvlan's MAC and address.
  rapidjson::Document st;
  st.Parse(fx.status_of("default", "pod-a").c_str());
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["interface"].GetString()) == "mv0");
  CHECK(std::string(st[1]["mac"].GetString()) == "02:00:00:00:0a:01");

  // Traffic between the two pods over the master, bounded.
  Proc ping = sh("ip netns exec pod-a ping -c 2 -W 2 -I mv0 " + ip_b);
  INFO("ping: ", ping.out, ping.err);
  CHECK(ping.exit_code == 0);

  // CHECK passes against the recorded result.
  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);

  for (auto [cid, ns, path] : {std::tuple{"ctr-a", "pod-a", pa}, std::tuple{"ctr-b", "pod-b", pb}}) {
    Proc del = fx.run("DEL", cid, path, "default", ns, fx.config());
    INFO("del ", cid, ": ", del.out, del.err);
    CHECK(del.exit_code == 0);
    CHECK(link_names(ns) == std::set<std::string>{"lo"});
  }
  CHECK(link_names("").count("mst0") == 1);  // the master is the node's, untouched
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(no_state(fx));
}

TEST_CASE("macvlan: without master the interface of the node's default route is used; private mode") {
  Node node;
  PodFixture fx(node);
  add_master("uplink0");
  REQUIRE(sh("ip addr add 192.0.2.2/24 dev uplink0 && ip route add default via 192.0.2.1 dev uplink0").exit_code == 0);
  fx.add_nad("default", "mv", macvlan_nad(R"("mode": "private", )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "mv");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto mv = link_detail("pod-a", "net1");
  CHECK(std::string(mv["linkinfo"]["info_kind"].GetString()) == "macvlan");
  CHECK(std::string(mv["linkinfo"]["info_data"]["mode"].GetString()) == "private");
  auto up = ip_json("link show dev uplink0");
  CHECK(mv["link_index"].GetInt() == up[0]["ifindex"].GetInt());
  CHECK(mv["mtu"].GetInt() == 1500);  // the master's
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(no_state(fx));
}

TEST_CASE("macvlan: vepa and passthru modes are created as asked") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  add_master("mst1");
  fx.add_nad("default", "vepa", macvlan_nad(R"("master": "mst0", "mode": "vepa", )", fx.ipam_dir(), "198.51.100.0/24"));
  fx.add_nad("default", "pt", macvlan_nad(R"("master": "mst1", "mode": "passthru", )", fx.ipam_dir(), "192.0.2.0/24"));
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "vepa,pt");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(std::string(link_detail("pod-a", "net1")["linkinfo"]["info_data"]["mode"].GetString()) == "vepa");
  CHECK(std::string(link_detail("pod-a", "net2")["linkinfo"]["info_data"]["mode"].GetString()) == "passthru");
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
}

TEST_CASE("macvlan: linkInContainer takes the master from the pod namespace") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  add_master("inner0");
  REQUIRE(sh("ip link set inner0 netns pod-a && ip -n pod-a link set inner0 up").exit_code == 0);
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "inner0", "linkInContainer": true, )", fx.ipam_dir()));
  fx.add_pod("default", "pod-a", "mv");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto mv = link_detail("pod-a", "net1");
  CHECK(std::string(mv["linkinfo"]["info_kind"].GetString()) == "macvlan");
  // Master and macvlan in the same namespace: iproute2 names the lower link directly.
  REQUIRE(mv.HasMember("link"));
  CHECK(mv["link"].GetString() == std::string("inner0"));
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "inner0"});
}

TEST_CASE("macvlan: a missing master, a bad mode and an MTU above the master's are CNI errors naming the value") {
  Node node;
  PodFixture fx(node);
  add_master("mst0", 1500);
  fx.add_nad("default", "nomaster", macvlan_nad(R"("master": "nosuch0", )", fx.ipam_dir()));
  fx.add_nad("default", "badmode", macvlan_nad(R"("master": "mst0", "mode": "sideways", )", fx.ipam_dir()));
  fx.add_nad("default", "bigmtu", macvlan_nad(R"("master": "mst0", "mtu": 9000, )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  for (auto [nad, needles] : {std::pair{"nomaster", std::vector<std::string>{"nosuch0"}},
                              std::pair{"badmode", std::vector<std::string>{"sideways"}},
                              std::pair{"bigmtu", std::vector<std::string>{"9000", "1500", "mst0"}}}) {
    fx.add_pod("default", "pod-a", nad);
    Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
    INFO(nad, ": ", a.out, a.err);
    CHECK(a.exit_code != 0);
    rapidjson::Document err;
    err.Parse(a.out.c_str());
    REQUIRE(err.IsObject());
    CHECK(err["code"].GetInt() == 7);
    for (auto& n : needles) CHECK(std::string(err["msg"].GetString()).find(n) != std::string::npos);
    // The default network attached before it was rolled back.
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    CHECK(no_state(fx));
    CHECK(address_files(fx.ipam_dir()).empty());
  }
}

TEST_CASE("macvlan: a link of the attachment's name already in the pod is a conflict (105); that link stays, nothing of the ADD does") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "taken", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  REQUIRE(sh("ip -n pod-a link add net1 type veth peer name net1p").exit_code == 0);  // someone else's net1
  const std::string index_before = std::to_string(link_detail("pod-a", "net1")["ifindex"].GetInt());
  fx.add_pod("default", "pod-a", "taken");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  CHECK(a.exit_code != 0);
  rapidjson::Document err;
  err.Parse(a.out.c_str());
  REQUIRE(err.IsObject());
  CHECK(err["code"].GetInt() == 105);
  CHECK(std::string(err["msg"].GetString()).find("net1 already exists") != std::string::npos);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "net1", "net1p"});
  CHECK(std::to_string(link_detail("pod-a", "net1")["ifindex"].GetInt()) == index_before);  // the same link, not a new one
  CHECK(no_state(fx));
  CHECK(address_files(fx.ipam_dir()).empty());
}

TEST_CASE("macvlan: an ADD failing in a chained plugin after the macvlan exists rolls it back") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  std::string ipam = fx.ipam_dir();
  for (auto [name, sysctl] : {std::pair{"outside", R"("kernel.hostname": "pwned")"},
                              std::pair{"missing", R"("net.ipv4.conf.IFNAME.no_such_knob": "1")"}}) {
    fx.add_nad("default", name, R"({"cniVersion": "1.0.0", "name": ")" + std::string(name) + R"(", "plugins": [
      {"type": "macvlan", "master": "mst0", "ipam": {"type": "host-local", "dataDir": ")" + ipam +
                                      R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}},
      {"type": "tuning", "sysctl": {)" + sysctl + R"(}}]})");
  }
  std::string pa = node.add_netns("pod-a");
  std::string hostname_before = sh("hostname").out;
  for (auto [name, needle] : {std::pair{"outside", "kernel.hostname"}, std::pair{"missing", "no_such_knob"}}) {
    fx.add_pod("default", "pod-a", name);
    Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
    INFO(name, ": ", a.out, a.err);
    CHECK(a.exit_code != 0);
    CHECK(a.out.find(needle) != std::string::npos);
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    for (auto& l : link_names("")) CHECK(l.rfind("mvl", 0) != 0);
    CHECK(no_state(fx));
    CHECK(address_files(fx.ipam_dir()).empty());
  }
  CHECK(sh("hostname").out == hostname_before);
}

TEST_CASE("macvlan: bcqueuelen sets the broadcast queue length (IFLA_MACVLAN_BC_QUEUE_LEN); CHECK compares it") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", "bcqueuelen": 1234, )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "mv");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto mv = link_detail("pod-a", "net1");
  CHECK(mv["linkinfo"]["info_data"]["bcqueuelen"].GetInt() == 1234);
  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});

  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", "bcqueuelen": -1, )", fx.ipam_dir()));
  Proc bad = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("bcqueuelen") != std::string::npos);
}

TEST_CASE("macvlan: once up with its address the pod interface sends a gratuitous ARP for it (as the reference plugin), "
          "seen on the master's veth peer") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  plumb::test::Listener peer("mst0p");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir()));
  std::string pa = node.add_netns("pod-g");
  fx.add_pod("default", "pod-g", R"([{"name": "mv", "interface": "mv0", "mac": "02:00:00:00:0a:07"}])");
  Proc a = fx.run("ADD", "ctr-g", pa, "default", "pod-g", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto ip = plumb::IpAddr::parse(first_addr("pod-g", "mv0"));
  REQUIRE(ip);
  const std::array<uint8_t, 6> mac{0x02, 0, 0, 0, 0x0a, 0x07};
  bool garp = false;
  for (auto& f : peer.frames(std::chrono::milliseconds(1000))) garp |= plumb::test::is_garp(f, mac, ip->bytes);
  CHECK_MESSAGE(garp, "no gratuitous ARP for " << ip->str());
  CHECK(pod_sysctl("pod-g", "net/ipv4/conf/mv0/arp_notify") == "1");
  CHECK(fx.run("DEL", "ctr-g", pa, "default", "pod-g", fx.config()).exit_code == 0);
}

namespace {

/// The IPv6 addresses of `dev` in namespace `ns` with their state: "<addr>" plus " tentative",
/// " dadfailed" and/or " nodad" as `ip -j` reports them.
std::vector<std::string> v6_states(const std::string& ns, const std::string& dev) {
  std::vector<std::string> out;
  auto d = ip_json("-6 -n " + ns + " addr show dev " + dev);
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      std::string s = a["local"].GetString();
      for (const char* flag : {"tentative", "dadfailed", "nodad"}) {
        if (a.HasMember(flag) && a[flag].GetBool()) s += std::string(" ") + flag;
      }
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("macvlan: with an IPv6 gateway the ADD returns once duplicate address detection is done (as the reference's "
          "SettleAddresses): no address tentative") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir(), "2001:db8:6::/64"));
  std::string pa = node.add_netns("pod-d");
  REQUIRE(pod_sysctl("pod-d", "net/ipv6/conf/default/accept_dad") == "1");  // DAD on, the kernel's default
  fx.add_pod("default", "pod-d", R"([{"name": "mv", "interface": "mv0"}])");
  Proc a = fx.run("ADD", "ctr-d", pa, "default", "pod-d", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  const auto states = v6_states("pod-d", "mv0");
  std::string shown;
  for (const auto& s : states) shown += s + "; ";
  INFO(shown);
  CHECK(std::count_if(states.begin(), states.end(), [](const std::string& s) { return s.starts_with("2001:db8:6::"); }) == 1);
  for (const auto& s : states) CHECK(s.find("tentative") == std::string::npos);
  CHECK(fx.run("DEL", "ctr-d", pa, "default", "pod-d", fx.config()).exit_code == 0);
  CHECK(no_state(fx));
}

TEST_CASE(
    "macvlan in a pod namespace whose DAD is off (all and default accept_dad 0): its address is added with "
    "IFA_F_NODAD, usable at once, as the kernel would leave it; with DAD on it is not") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir(), "2001:db8:6::/64"));
  for (const char* pod : {"pod-off", "pod-on"}) {
    CAPTURE(pod);
    const bool off = std::string(pod) == "pod-off";
    std::string pa = node.add_netns(pod);
    if (off) {
      REQUIRE(plumb::test::sh(std::string("ip netns exec ") + pod +
                              " sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0")
                  .exit_code == 0);
    }
    fx.add_pod("default", pod, R"([{"name": "mv", "interface": "mv0"}])");
    const std::string cid = std::string("ctr-") + pod;
    Proc a = fx.run("ADD", cid, pa, "default", pod, fx.config());
    INFO(a.out, a.err);
    REQUIRE(a.exit_code == 0);
    const auto states = v6_states(pod, "mv0");
    std::string shown;
    for (const auto& st : states) shown += st + "; ";
    INFO(shown);
    const auto mine = std::find_if(states.begin(), states.end(),
                                   [](const std::string& st) { return st.starts_with("2001:db8:6::"); });
    REQUIRE(mine != states.end());
    CHECK((mine->find(" nodad") != std::string::npos) == off);
    CHECK(mine->find("tentative") == std::string::npos);
    CHECK(fx.run("DEL", cid, pa, "default", pod, fx.config()).exit_code == 0);
  }
  CHECK(no_state(fx));
}

TEST_CASE("macvlan: an address another host on the link already has fails duplicate address detection: the ADD fails "
          "naming it (DADFAILED) and leaves nothing") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  REQUIRE(sh("ip addr add 2001:db8:7::5/64 dev mst0p nodad").exit_code == 0);  // the other host, on the master's link
  fx.add_nad("default", "mv", R"({"cniVersion": "1.0.0", "type": "macvlan", "master": "mst0",
   "ipam": {"type": "static", "addresses": [{"address": "2001:db8:7::5/64", "gateway": "2001:db8:7::1"}]}})");
  std::string pa = node.add_netns("pod-x");
  fx.add_pod("default", "pod-x", R"([{"name": "mv", "interface": "mv0"}])");
  Proc a = fx.run("ADD", "ctr-x", pa, "default", "pod-x", fx.config());
  INFO(a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("2001:db8:7::5/64 failed duplicate address detection (DADFAILED)") != std::string::npos);
  CHECK(link_names("pod-x") == std::set<std::string>{"lo"});
  CHECK(no_state(fx));
  CHECK(address_files(fx.ipam_dir()).empty());
}

TEST_CASE("macvlan and bridge in a pod namespace whose IPv6 is disabled: IPv6 is enabled on lo and the interfaces, as "
          "the reference's ConfigureIface, and their addresses are added") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir(), "2001:db8:6::/64"));
  std::string pa = node.add_netns("pod-6");
  REQUIRE(sh("ip netns exec pod-6 sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 "
             "net.ipv6.conf.lo.disable_ipv6=1").exit_code == 0);
  fx.add_pod("default", "pod-6", R"([{"name": "mv", "interface": "mv0"}])");
  Proc a = fx.run("ADD", "ctr-6", pa, "default", "pod-6", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  for (const char* dev : {"lo", "eth0", "mv0"}) {
    CAPTURE(dev);
    CHECK(pod_sysctl("pod-6", std::string("net/ipv6/conf/") + dev + "/disable_ipv6") == "0");
  }
  CHECK(first_addr("pod-6", "eth0", "inet6").starts_with("2001:db8:0:1:"));  // the default network's bridge
  CHECK(first_addr("pod-6", "mv0", "inet6").starts_with("2001:db8:6:"));
  CHECK(fx.run("DEL", "ctr-6", pa, "default", "pod-6", fx.config()).exit_code == 0);
  CHECK(link_names("pod-6") == std::set<std::string>{"lo"});
  CHECK(no_state(fx));
}

TEST_CASE("macvlan: duplicate address detection is waited for at most 5 s: still running on a link with carrier fails "
          "the ADD naming the address; on a link without carrier (no DAD starts) the ADD succeeds, as the reference") {
  Node node;
  PodFixture fx(node);
  add_master("mst0");
  fx.add_nad("default", "mv", macvlan_nad(R"("master": "mst0", )", fx.ipam_dir(), "2001:db8:6::/64"));
  SUBCASE("carrier, DAD of 10 probes (10 s)") {
    std::string pa = node.add_netns("pod-s");
    REQUIRE(sh("ip netns exec pod-s sysctl -qw net.ipv6.conf.default.dad_transmits=10").exit_code == 0);
    fx.add_pod("default", "pod-s", R"([{"name": "mv", "interface": "mv0"}])");
    Proc a = fx.run("ADD", "ctr-s", pa, "default", "pod-s", fx.config());
    INFO(a.out, a.err);
    CHECK(a.exit_code != 0);
    CHECK(a.out.find("mv0: address 2001:db8:6::2/64 still tentative after 5000 ms") != std::string::npos);
    CHECK(link_names("pod-s") == std::set<std::string>{"lo"});
    CHECK(no_state(fx));
    CHECK(address_files(fx.ipam_dir()).empty());
  }
  SUBCASE("no carrier") {
    REQUIRE(sh("ip link set mst0p down").exit_code == 0);
    std::string pa = node.add_netns("pod-n");
    fx.add_pod("default", "pod-n", R"([{"name": "mv", "interface": "mv0"}])");
    Proc a = fx.run("ADD", "ctr-n", pa, "default", "pod-n", fx.config());
    INFO(a.out, a.err);
    REQUIRE(a.exit_code == 0);
    const auto states = v6_states("pod-n", "mv0");
    CHECK(std::find(states.begin(), states.end(), "2001:db8:6::2 tentative") != states.end());
    CHECK(fx.run("DEL", "ctr-n", pa, "default", "pod-n", fx.config()).exit_code == 0);
    CHECK(no_state(fx));
  }
}
