// The tap driver end to end: the real plumb binary in a private node, the device's kind, flags,
// owner, MTU and MAC read back with `ip -d -j`, a bridge in the pod namespace, the SELinux
// helper mode, and DEL leaving nothing.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;
const auto links = plumb::test::link_names;

TEST_CASE("tap: a layer-3 tap with the mac capability, mtu, multiQueue, owner and group; DEL deletes it") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "tp", R"({"cniVersion": "1.0.0", "type": "tap", "mtu": 1300, "multiQueue": true,
     "owner": 4242, "group": 4343, "capabilities": {"mac": true},
     "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]],
              "routes": [{"dst": "192.0.2.0/24"}]}})");
  std::string pa = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", R"([{"name": "tp", "interface": "tap0", "mac": "02:00:00:00:0c:01"}])");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);

  auto d = ip_json("-d -n pod-a link show dev tap0");
  REQUIRE(d.Size() == 1);
  auto& l = d[0];
  CHECK(std::string(l["linkinfo"]["info_kind"].GetString()) == "tun");
  auto& info = l["linkinfo"]["info_data"];
  CHECK(std::string(info["type"].GetString()) == "tap");
  CHECK(info["multi_queue"].GetBool());
  CHECK(info["vnet_hdr"].GetBool());
  CHECK_FALSE(info["pi"].GetBool());
  CHECK(info["persist"].GetBool());
  // (uids without a passwd entry: iproute2 prints them as numbers)
  REQUIRE(info.HasMember("user"));
  REQUIRE(info["user"].IsInt());
  CHECK(info["user"].GetInt() == 4242);
  REQUIRE(info["group"].IsInt());
  CHECK(info["group"].GetInt() == 4343);
  CHECK(l["mtu"].GetInt() == 1300);
  CHECK(std::string(l["address"].GetString()) == "02:00:00:00:0c:01");
  bool up = false;
  for (auto& f : l["flags"].GetArray()) up |= std::string(f.GetString()) == "UP";
  CHECK(up);
  // Layer 3: the address, the IPAM route, arp_notify; no temporary name left.
  auto addrs = ip_json("-n pod-a -4 addr show dev tap0");
  CHECK(std::string(addrs[0]["addr_info"][0]["local"].GetString()).rfind("198.51.100.", 0) == 0);
  CHECK(sh("ip -n pod-a route show 192.0.2.0/24").out.find("dev tap0") != std::string::npos);
  CHECK(sh("ip netns exec pod-a cat /proc/sys/net/ipv4/conf/tap0/arp_notify").out == "1\n");
  CHECK(links("pod-a") == std::set<std::string>{"lo", "eth0", "tap0"});

  rapidjson::Document st;
  st.Parse(fx.status_of("default", "pod-a").c_str());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["mac"].GetString()) == "02:00:00:00:0c:01");

  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);

  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("tap: layer 2 as a port of a bridge in the pod namespace") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  REQUIRE(sh("ip -n pod-a link add vmbr0 type bridge && ip -n pod-a link set vmbr0 up").exit_code == 0);
  fx.add_nad("default", "tp", R"({"cniVersion": "1.0.0", "type": "tap", "bridge": "vmbr0"})");
  fx.add_pod("default", "pod-a", "tp");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto tap = ip_json("-n pod-a link show dev net1");
  REQUIRE(tap.Size() == 1);
  REQUIRE(tap[0].HasMember("master"));
  CHECK(std::string(tap[0]["master"].GetString()) == "vmbr0");
  CHECK(sh("ip -n pod-a -4 addr show dev net1").out.find("inet ") == std::string::npos);  // layer 2: no address
  Proc del = fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(del.exit_code == 0);
  CHECK(links("pod-a") == std::set<std::string>{"lo", "vmbr0"});
}

TEST_CASE("tap: a bridge that is not in the pod namespace fails the ADD and leaves nothing") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  fx.add_nad("default", "tp", R"({"cniVersion": "1.0.0", "type": "tap", "bridge": "nosuchbr"})");
  fx.add_pod("default", "pod-a", "tp");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("nosuchbr") != std::string::npos);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
}

TEST_CASE("tap: selinuxcontext on a node without SELinux is refused with code 104, nothing created") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  fx.add_nad("default", "tp", R"({"cniVersion": "1.0.0", "type": "tap", "selinuxcontext": "system_u:system_r:container_t:s0"})");
  fx.add_pod("default", "pod-a", "tp");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config(R"("sysfsRoot": ")" + node.dir() + R"(/nosys")"));
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("\"code\":104") != std::string::npos);
  CHECK(a.out.find("selinuxContext") != std::string::npos);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
}

TEST_CASE("tap: with SELinux reported (fake selinuxfs) the helper runs; a context the kernel refuses fails cleanly") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  plumb::test::write_file(node.dir() + "/fakesys/fs/selinux/enforce", "1\n");
  fx.add_nad("default", "tp", R"({"cniVersion": "1.0.0", "type": "tap", "selinuxContext": "system_u:system_r:container_t:s0"})");
  fx.add_pod("default", "pod-a", "tp");
  // This kernel has no SELinux: the helper's write of the exec context is refused.
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config(R"("sysfsRoot": ")" + node.dir() + R"(/fakesys")"));
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("SELinux exec context") != std::string::npos);
  CHECK(links("pod-a") == std::set<std::string>{"lo"});
}

TEST_CASE("tap: plumb's helper mode creates a persistent tap in the namespace it runs in") {
  Node node;
  node.add_netns("pod-a");
  Proc p = sh(std::string("ip netns exec pod-a ") + plumb::test::plumb_binary() + " __plumb-create-tap tapx0 0 - 4343");
  INFO(p.out, p.err);
  REQUIRE(p.exit_code == 0);
  auto d = ip_json("-d -n pod-a link show dev tapx0");
  REQUIRE(d.Size() == 1);
  CHECK(std::string(d[0]["linkinfo"]["info_data"]["type"].GetString()) == "tap");
  REQUIRE(d[0]["linkinfo"]["info_data"]["group"].IsInt());  // a gid without a group entry: printed as a number
  CHECK(d[0]["linkinfo"]["info_data"]["group"].GetInt() == 4343);
  CHECK_FALSE(d[0]["linkinfo"]["info_data"]["multi_queue"].GetBool());
  Proc again = sh(std::string("ip netns exec pod-a ") + plumb::test::plumb_binary() + " __plumb-create-tap tapx0 0 - -");
  CHECK(again.exit_code == 1);
  CHECK(sh("ip -n pod-a link del tapx0").exit_code == 0);
}
