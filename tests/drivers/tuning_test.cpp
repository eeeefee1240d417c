// The tuning driver end to end (chained after host-device or macvlan), run through the real plumb
// binary; link attributes read back with `ip -j -d`, sysctls from /proc/sys inside the pod.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::pod_sysctl;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

struct LinkState {
  int mtu = 0;
  std::string mac;
  int txqlen = 0;
  int promiscuity = 0;
  bool promisc_flag = false;
  bool allmulti_flag = false;
  bool up = false;
};

LinkState link_state(const std::string& ns, const std::string& dev) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "-d link show dev " + dev);
  REQUIRE(d.IsArray());
  REQUIRE(d.Size() == 1);
  LinkState s;
  s.mtu = d[0]["mtu"].GetInt();
  s.mac = d[0]["address"].GetString();
  s.txqlen = d[0]["txqlen"].GetInt();
  s.promiscuity = d[0]["promiscuity"].GetInt();
  for (auto& f : d[0]["flags"].GetArray()) {
    std::string flag = f.GetString();
    s.promisc_flag |= flag == "PROMISC";
    s.allmulti_flag |= flag == "ALLMULTI";
    s.up |= flag == "UP";
  }
  return s;
}

bool no_state(const PodFixture& fx) { return PodFixture::files_under(fx.state() + "/containers").empty(); }

std::string ipam(const PodFixture& fx, const std::string& subnet) {
  return R"("ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]})";
}

/// The network-status entry of `ifname` of a pod.
std::string status_mac(const PodFixture& fx, const std::string& pod, const std::string& ifname) {
  rapidjson::Document st;
  st.Parse(fx.status_of("default", pod).c_str());
  REQUIRE(st.IsArray());
  for (auto& e : st.GetArray()) {
    if (e.HasMember("interface") && ifname == e["interface"].GetString()) return e["mac"].GetString();
  }
  return "";
}

}  // namespace

TEST_CASE("tuning after host-device: mtu, mac, promisc, allmulti, txQLen and sysctls applied, then restored on DEL") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add hd0 mtu 1400 address 02:00:00:00:07:01 type veth peer name hd0p").exit_code == 0);
  REQUIRE(sh("ip link set hd0 txqueuelen 1000").exit_code == 0);
  auto before = link_state("", "hd0");
  REQUIRE(before.txqlen == 1000);
  REQUIRE_FALSE(before.promisc_flag);
  fx.add_nad("default", "tuned", R"({"cniVersion": "1.0.0", "name": "tuned", "plugins": [
    {"type": "host-device", "device": "hd0", )" + ipam(fx, "192.0.2.0/24") + R"(},
    {"type": "tuning", "mtu": 1300, "mac": "02:00:00:00:07:aa", "promisc": true, "allmulti": true, "txQLen": 123,
     "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "2", "net/ipv4/conf/all/arp_announce": "2",
                "net.ipv6.conf.IFNAME.accept_ra": "0"}}]})");
  std::string pod = node.add_netns("pod-a");
  REQUIRE(pod_sysctl("pod-a", "net/ipv4/conf/all/arp_announce") == "0");
  fx.add_pod("default", "pod-a", "tuned");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  INFO("add: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);

  auto s = link_state("pod-a", "net1");
  CHECK(s.mtu == 1300);
  CHECK(s.mac == "02:00:00:00:07:aa");
  CHECK(s.promisc_flag);
  CHECK(s.allmulti_flag);
  CHECK(s.txqlen == 123);
  CHECK(s.up);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/net1/arp_ignore") == "2");
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/all/arp_announce") == "2");
  CHECK(pod_sysctl("pod-a", "net/ipv6/conf/net1/accept_ra") == "0");
  // The result passed on carries the new MAC.
  CHECK(status_mac(fx, "pod-a", "net1") == "02:00:00:00:07:aa");

  Proc check = fx.run("CHECK", "a", pod, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(sh("ip -n pod-a link set net1 txqueuelen 77").exit_code == 0);
  Proc check2 = fx.run("CHECK", "a", pod, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  CHECK(check2.exit_code != 0);
  CHECK(check2.out.find("txqueuelen") != std::string::npos);

  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  // host-device put back name, MTU and MAC; promisc, allmulti and txqueuelen are tuning's restore.
  auto after = link_state("", "hd0");
  CHECK(after.mtu == 1400);
  CHECK(after.mac == "02:00:00:00:07:01");
  CHECK_FALSE(after.promisc_flag);
  CHECK(after.promiscuity == 0);
  CHECK_FALSE(after.allmulti_flag);
  CHECK(after.txqlen == 1000);
  CHECK_FALSE(after.up);
  // The namespace-wide sysctl is back too.
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/all/arp_announce") == "0");
  CHECK(no_state(fx));
}

TEST_CASE("tuning after macvlan: IFNAME substitution with a dotted interface name; DEL with the namespace gone") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up && ip link set mst0p up").exit_code == 0);
  fx.add_nad("default", "mvt", R"({"cniVersion": "1.0.0", "name": "mvt", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "mac": "02:00:00:00:08:aa", "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "1"}}]})");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", R"([{"name": "mvt", "interface": "tun.1"}])");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  INFO("add: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/tun.1/arp_ignore") == "1");
  CHECK(link_state("pod-a", "tun.1").mac == "02:00:00:00:08:aa");
  CHECK(status_mac(fx, "pod-a", "tun.1") == "02:00:00:00:08:aa");

  node.del_netns("pod-a");
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(no_state(fx));
}

TEST_CASE("tuning: a failure after tuning's sysctl changed rolls the sysctl and the macvlan back") {
  // The MTU exceeds the macvlan master's: the kernel refuses the link change after the sysctls
  // were written.
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up && ip link set mst0p up").exit_code == 0);
  fx.add_nad("default", "mvt", R"({"cniVersion": "1.0.0", "name": "mvt", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "mtu": 9000, "sysctl": {"net.ipv4.conf.all.arp_announce": "2"}}]})");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "mvt");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  INFO("add: ", a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("net1") != std::string::npos);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/all/arp_announce") == "0");
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(no_state(fx));
}

TEST_CASE("tuning: not chained (no prevResult) and sysctl keys outside net/ are configuration errors") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up").exit_code == 0);
  fx.add_nad("default", "alone", R"({"cniVersion": "1.0.0", "type": "tuning", "mtu": 1300})");
  fx.add_nad("default", "escape", R"({"cniVersion": "1.0.0", "name": "escape", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "sysctl": {"net/../kernel/hostname": "x"}}]})");
  fx.add_nad("default", "vm", R"({"cniVersion": "1.0.0", "name": "vm", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "sysctl": {"vm.swappiness": "1"}}]})");
  std::string pod = node.add_netns("pod-a");
  for (auto [nad, needle] : {std::pair{"alone", "prevResult"}, std::pair{"escape", "net/../kernel/hostname"},
                             std::pair{"vm", "vm.swappiness"}}) {
    fx.add_pod("default", "pod-a", nad);
    Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
    INFO(nad, ": ", a.out, a.err);
    CHECK(a.exit_code != 0);
    CHECK(a.out.find(needle) != std::string::npos);
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    CHECK(no_state(fx));
  }
}

TEST_CASE("tuning: args.cni (the selection's cni-args) adds and overrides sysctls and wins the MAC over runtimeConfig.mac") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up && ip link set mst0p up").exit_code == 0);
  fx.add_nad("default", "mvt", R"({"cniVersion": "1.0.0", "name": "mvt", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "capabilities": {"mac": true}, "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "1"}}]})");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", R"([{"name": "mvt", "mac": "02:00:00:00:09:cc",
    "cni-args": {"mac": "02:00:00:00:09:bb",
                 "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "2", "net/ipv4/conf/IFNAME/arp_announce": "1"}}}])");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  INFO("add: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/net1/arp_ignore") == "2");
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/net1/arp_announce") == "1");
  CHECK(link_state("pod-a", "net1").mac == "02:00:00:00:09:bb");
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(no_state(fx));
}

TEST_CASE("tuning: a sysctl key given twice in one object is refused") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up").exit_code == 0);
  fx.add_nad("default", "mvt", R"({"cniVersion": "1.0.0", "name": "mvt", "plugins": [
    {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
    {"type": "tuning", "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "1", "net.ipv4.conf.IFNAME.arp_ignore": "2"}}]})");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "mvt");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("duplicated sysctl keys") != std::string::npos);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
}

TEST_CASE("tuning: the sysctl allowlist file (tuningAllowlist) admits matching keys and refuses others before any change") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add mst0 type veth peer name mst0p && ip link set mst0 up && ip link set mst0p up").exit_code == 0);
  const std::string allow = node.dir() + "/allowlist.conf";
  plumb::test::write_file(allow, "\n^net\\.ipv4\\.conf\\.IFNAME\\.arp_ignore$\n  ^net\\.core\\.somaxconn$  \n");
  const std::string conf = fx.config(R"("tuningAllowlist": ")" + allow + R"(")");
  auto nad = [&](const std::string& key) {
    return R"({"cniVersion": "1.0.0", "name": "mvt", "plugins": [
      {"type": "macvlan", "master": "mst0", )" + ipam(fx, "198.51.100.0/24") + R"(},
      {"type": "tuning", "sysctl": {")" + key + R"(": "1"}}]})";
  };
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "mvt");

  fx.add_nad("default", "mvt", nad("net.ipv4.conf.IFNAME.arp_announce"));
  Proc bad = fx.run("ADD", "a", pod, "default", "pod-a", conf);
  INFO("refused: ", bad.out, bad.err);
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("net.ipv4.conf.IFNAME.arp_announce is not allowed") != std::string::npos);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/all/arp_announce") == "0");
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(no_state(fx));

  fx.add_nad("default", "mvt", nad("net.ipv4.conf.IFNAME.arp_ignore"));
  Proc good = fx.run("ADD", "a", pod, "default", "pod-a", conf);
  INFO("allowed: ", good.out, good.err);
  REQUIRE(good.exit_code == 0);
  CHECK(pod_sysctl("pod-a", "net/ipv4/conf/net1/arp_ignore") == "1");
  CHECK(fx.run("DEL", "a", pod, "default", "pod-a", conf).exit_code == 0);

  // A line that is not a regular expression is an error naming it.
  plumb::test::write_file(allow, "^net\\.ipv4\\.(\n");
  Proc broken = fx.run("ADD", "a", pod, "default", "pod-a", conf);
  CHECK(broken.exit_code != 0);
  CHECK(broken.out.find("is not a regular expression") != std::string::npos);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
}
