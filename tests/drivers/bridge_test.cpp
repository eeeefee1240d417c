// The bridge driver's port keys, through the real plumb binary in a private node, the kernel read
// back with `ip -j`, `bridge -j` and `nft -j`, traffic with bounded pings: portIsolation,
// macspoofchk (plumb's `bridge plumb` table), disableContainerInterface, configuration errors and
// the clear error of a kernel without bridge VLAN filtering (host); the driver's steps and their
// inverses through a RecordingExecutor, undone one by one; vlan / vlanTrunk /
// preserveDefaultVlan with real VLAN filtering and the VLAN gateway interface (full-kernel tier);
// a warm worker's node watch sparing the gateway and forwarding look-ups, and the repairs after
// another party's changes.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <tuple>
#include <vector>

#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/netns.hpp"
#include "engine/kernel/netconf_watch.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/packet_listener.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/syscall_count.hpp"

using namespace plumb::test;

namespace {

/// A bridge network "brt" with `keys`, and a static address (none: "") for one pod.
std::string bridge_nad(const std::string& keys, const std::string& address) {
  std::string ipam = address.empty() ? "" : R"(, "ipam": {"type": "static", "addresses": [{"address": ")" + address + R"("}]})";
  return R"({"cniVersion": "1.0.0", "type": "bridge", "bridge": "brt")" + (keys.empty() ? "" : ", " + keys) + ipam + "}";
}

/// Adds pod `pod` attached (as net1) to its own NAD "<pod>-net" with `keys` and `address`.
Proc add_pod(PodFixture& fx, Node& node, const std::string& pod, const std::string& keys, const std::string& address) {
  fx.add_nad("default", pod + "-net", bridge_nad(keys, address));
  fx.add_pod("default", pod, R"([{"name": ")" + pod + R"(-net", "interface": "net1"}])");
  Proc p = fx.run("ADD", "ctr-" + pod, node.add_netns(pod), "default", pod, fx.config());
  INFO(pod, ": ", p.out, p.err);
  return p;
}

Proc del_pod(PodFixture& fx, const std::string& pod) {
  return fx.run("DEL", "ctr-" + pod, "/run/netns/" + pod, "default", pod, fx.config());
}

/// The host end (in the node) of the pod's net1.
std::string host_end(const std::string& pod) {
  int peer = link_detail(pod, "net1")["link_index"].GetInt();
  auto d = ip_json("link show");
  for (auto& l : d.GetArray()) {
    if (l["ifindex"].GetInt() == peer) return l["ifname"].GetString();
  }
  FAIL("no host end of " << pod);
  return {};
}

/// The port's VLANs from `bridge -j vlan show dev`, as "vid[P][U]" strings.
std::vector<std::string> port_vlans(const std::string& dev) {
  std::vector<std::string> out;
  Proc p = sh("bridge -j vlan show dev " + dev);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE(d.IsArray());
  for (auto& port : d.GetArray()) {
    for (auto& v : port["vlans"].GetArray()) {
      std::string s = std::to_string(v["vlan"].GetInt());
      if (v.HasMember("flags")) {
        for (auto& f : v["flags"].GetArray()) s += std::string(f.GetString()) == "PVID" ? "P" : "U";
      }
      out.push_back(s);
    }
  }
  return out;
}


std::string nft_bridge_table() { return sh("nft list table bridge plumb 2>&1").out; }

}  // namespace

TEST_CASE("bridge config: vlan, vlanTrunk, hairpin with promisc, IPAM with disableContainerInterface and an unknown ipMasqBackend are refused naming the key") {
  Node node;
  PodFixture fx(node);
  auto expect = [&](const std::string& keys, const std::string& address, const std::string& needle) {
    Proc p = add_pod(fx, node, "p", keys, address);
    CHECK(p.exit_code != 0);
    CHECK(p.out.find(needle) != std::string::npos);
    CHECK(no_records(fx));
    node.del_netns("p");
  };
  expect(R"("vlan": 4095)", "", "p-net.vlan 4095 must be 0..4094");
  expect(R"("vlanTrunk": [{"minID": 10}])", "", "p-net.vlanTrunk[0]: minID and maxID should be configured simultaneously, maxID is missing");
  expect(R"("vlanTrunk": [{"minID": 20, "maxID": 10}])", "", "minID is greater than maxID in trunk parameter");
  expect(R"("vlanTrunk": [{"id": 0}])", "", "incorrect trunk id parameter");
  expect(R"("vlanTrunk": [{"id": 5}, {"minID": 1, "maxID": 4095}])", "", "p-net.vlanTrunk[1].maxID 4095");
  expect(R"("hairpinMode": true, "promiscMode": true)", "", "cannot set hairpin mode and promiscuous mode at the same time");
  expect(R"("disableContainerInterface": true)", "198.51.100.10/24", "cannot use IPAM when disableContainerInterface is set");
  expect(R"("ipMasq": true, "ipMasqBackend": "ebpf")", "198.51.100.10/24",
         R"(p-net.ipMasqBackend \"ebpf\" must be \"iptables\" or \"nftables\")");  // as JSON escapes it
  CHECK(link_names("").count("brt") == 0);  // refused while parsing: not even the bridge was made
}

TEST_CASE("bridge vlan on this machine's kernel: without bridge VLAN filtering the ADD fails naming it, leaving nothing") {
  Node node;
  PodFixture fx(node);
  Proc p = add_pod(fx, node, "pod-a", R"("vlan": 100)", "198.51.100.10/24");
  if (kernel_can_create("type bridge vlan_filtering 1")) {
    MESSAGE("this kernel has bridge VLAN filtering: the case checks the working ADD instead of the missing-feature error");
    REQUIRE(p.exit_code == 0);
    CHECK(port_vlans(host_end("pod-a")) == std::vector<std::string>{"100PU"});
  } else {
    CHECK(p.exit_code != 0);
    CHECK(p.out.find("\"code\":104") != std::string::npos);
    CHECK(p.out.find("bridge brt: vlan 100 needs bridge VLAN filtering, which this kernel does not support") != std::string::npos);
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    CHECK(link_names("").count("brt") == 0);
    CHECK(no_records(fx));
  }
}

TEST_CASE("bridge portIsolation: isolated pods cannot reach each other, both reach a pod on a normal port") {
  Node node;
  PodFixture fx(node);
  REQUIRE(add_pod(fx, node, "iso-a", R"("portIsolation": true)", "198.51.100.11/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "iso-b", R"("portIsolation": true)", "198.51.100.12/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "open", "", "198.51.100.13/24").exit_code == 0);
  CHECK(link_detail("", host_end("iso-a"))["linkinfo"]["info_slave_data"]["isolated"].GetBool());
  CHECK_FALSE(link_detail("", host_end("open"))["linkinfo"]["info_slave_data"]["isolated"].GetBool());
  CHECK_FALSE(pings("iso-a", "198.51.100.12", "net1", 1));
  CHECK(pings("iso-a", "198.51.100.13", "net1"));
  CHECK(pings("iso-b", "198.51.100.13", "net1"));
  for (const char* pod : {"iso-a", "iso-b", "open"}) CHECK(del_pod(fx, pod).exit_code == 0);
  CHECK(no_records(fx));
}

TEST_CASE("bridge macspoofchk: only frames with the pod's MAC leave its port, checked in plumb's bridge table; DEL removes its elements") {
  Node node;
  PodFixture fx(node);
  Proc a = add_pod(fx, node, "spoof", R"("macspoofchk": true, "mac": "02:00:00:00:5c:01")", "198.51.100.21/24");
  REQUIRE(a.exit_code == 0);
  REQUIRE(add_pod(fx, node, "plain", "", "198.51.100.22/24").exit_code == 0);
  const std::string port = host_end("spoof");
  const std::string table = nft_bridge_table();
  INFO(table);
  CHECK(table.find("iifname @macspoof-ports iifname . ether saddr != @macspoof-allowed drop") != std::string::npos);
  CHECK(table.find("\"" + port + "\" . 02:00:00:00:5c:01 comment \"ctr-spoof/net1\"") != std::string::npos);
  CHECK(pings("spoof", "198.51.100.22", "net1"));
  // The unchecked pod may change its MAC.
  REQUIRE(sh("ip -n plain link set net1 address 02:00:00:00:5c:98").exit_code == 0);
  CHECK(pings("plain", "198.51.100.21", "net1"));
  // Another source MAC from the checked pod is dropped at its port, until it is the pod's again.
  REQUIRE(sh("ip -n spoof link set net1 address 02:00:00:00:5c:99 && ip -n spoof neigh flush dev net1").exit_code == 0);
  CHECK_FALSE(pings("spoof", "198.51.100.22", "net1", 1));
  REQUIRE(sh("ip -n spoof link set net1 address 02:00:00:00:5c:01").exit_code == 0);
  CHECK(pings("spoof", "198.51.100.22", "net1"));

  Proc check = fx.run("CHECK", "ctr-spoof", "/run/netns/spoof", "default", "spoof", fx.config(R"("prevResult": )" + a.out));
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  CHECK(del_pod(fx, "spoof").exit_code == 0);
  CHECK(nft_bridge_table().find("02:00:00:00:5c:01") == std::string::npos);
  CHECK(nft_bridge_table().find(port) == std::string::npos);
  CHECK(del_pod(fx, "plain").exit_code == 0);
  CHECK(no_records(fx));
}

TEST_CASE("bridge: the pod end is reported as the kernel has it: MAC (random, unicast, locally administered) and MTU, with and without mtu") {
  Node node;
  PodFixture fx(node);
  // The gateway turns forwarding on in the node (read over rtnetlink, written only when off).
  const char* forwarding = "cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv6/conf/all/forwarding";
  REQUIRE(sh(forwarding).out == "0\n0\n");  // a new namespace's
  for (auto [pod, keys, mtu, address] : {std::tuple{"plain", "", 1500, "198.51.100.31/24"},
                                          std::tuple{"small", R"("mtu": 1400)", 1400, "198.51.100.32/24"}}) {
    INFO(pod);
    REQUIRE(add_pod(fx, node, pod, keys, address).exit_code == 0);
    rapidjson::Document st;
    st.Parse(fx.status_of("default", pod).c_str());
    REQUIRE(st.IsArray());
    const rapidjson::Value* net1 = nullptr;
    for (auto& e : st.GetArray()) {
      if (e.HasMember("interface") && std::string(e["interface"].GetString()) == "net1") net1 = &e;
    }
    REQUIRE(net1 != nullptr);
    auto l = link_detail(pod, "net1");
    const std::string mac = l["address"].GetString();
    CHECK(std::string((*net1)["mac"].GetString()) == mac);
    CHECK((*net1)["mtu"].GetInt() == mtu);
    CHECK(l["mtu"].GetInt() == mtu);
    CHECK(link_detail("", host_end(pod))["mtu"].GetInt() == mtu);
    const unsigned first = static_cast<unsigned>(std::stoul(mac.substr(0, 2), nullptr, 16));
    CHECK((first & 0x01) == 0);  // unicast
    CHECK((first & 0x02) == 2);  // locally administered
    CHECK(sh(forwarding).out == "1\n1\n");
    CHECK(del_pod(fx, pod).exit_code == 0);
  }
  CHECK(no_records(fx));
}

TEST_CASE("bridge: with an IPAM the pod end announces its address as it comes up (arp_notify, as the reference bridge), "
          "IPv6 only too; an L2-only pod end does not") {
  Node node;
  PodFixture fx(node);
  // Every link of the node, the pod end's host-side peer too once it exists: the frame is seen
  // as that peer receives it, whether or not the bridge's new port forwards yet (the port's
  // carrier comes with the kernel's link watch, after the pod end's coming up sent the ARP).
  Listener node_links("");
  REQUIRE(add_pod(fx, node, "garp", R"("mac": "02:00:00:00:0b:01")", "198.51.100.41/24").exit_code == 0);
  const std::array<uint8_t, 6> mac{0x02, 0, 0, 0, 0x0b, 0x01};
  const auto ip = plumb::IpAddr::parse("198.51.100.41");
  REQUIRE(ip);
  bool garp = false;
  for (auto& f : node_links.frames(std::chrono::milliseconds(1000))) garp |= is_garp(f, mac, ip->bytes);
  CHECK_MESSAGE(garp, "no gratuitous ARP for 198.51.100.41 from the pod end");
  CHECK(pod_sysctl("garp", "net/ipv4/conf/net1/arp_notify") == "1");
  // IPv6 only: nothing to announce at once, arp_notify set all the same (with the link's up).
  REQUIRE(add_pod(fx, node, "v6only", "", "2001:db8:8::5/64").exit_code == 0);
  CHECK(pod_sysctl("v6only", "net/ipv4/conf/net1/arp_notify") == "1");
  CHECK(link_detail("v6only", "net1")["operstate"].GetString() != std::string("DOWN"));
  REQUIRE(add_pod(fx, node, "l2only", "", "").exit_code == 0);
  CHECK(pod_sysctl("l2only", "net/ipv4/conf/net1/arp_notify") == "0");
  for (const char* pod : {"garp", "v6only", "l2only"}) CHECK(del_pod(fx, pod).exit_code == 0);
  CHECK(no_records(fx));
}

TEST_CASE("bridge disableContainerInterface: the pod end exists and stays down, the host end is a port; CHECK passes; DEL") {
  Node node;
  PodFixture fx(node);
  Proc a = add_pod(fx, node, "l2", R"("disableContainerInterface": true)", "");
  REQUIRE(a.exit_code == 0);
  auto l = link_detail("l2", "net1");
  CHECK(std::string(l["operstate"].GetString()) == "DOWN");
  CHECK(global_addr("l2", "net1").empty());
  CHECK(std::string(link_detail("", host_end("l2"))["master"].GetString()) == "brt");
  Proc check = fx.run("CHECK", "ctr-l2", "/run/netns/l2", "default", "l2", fx.config(R"("prevResult": )" + a.out));
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  // Without the key the L2-only pod end is up (the reference sets it up).
  REQUIRE(add_pod(fx, node, "l2up", "", "").exit_code == 0);
  CHECK(link_detail("l2up", "net1")["operstate"].GetString() != std::string("DOWN"));
  CHECK(del_pod(fx, "l2").exit_code == 0);
  CHECK(del_pod(fx, "l2up").exit_code == 0);
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE("bridge vlan: VLAN 100 pods reach each other and not VLAN 200 or the default VLAN; trunk and preserveDefaultVlan ports") {
  Node node;
  PodFixture fx(node);
  Proc a = add_pod(fx, node, "v100a", R"("vlan": 100)", "198.51.100.31/24");
  REQUIRE(a.exit_code == 0);
  REQUIRE(add_pod(fx, node, "v100b", R"("vlan": 100)", "198.51.100.32/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "v200", R"("vlan": 200)", "198.51.100.33/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "untagged", "", "198.51.100.34/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "trunk", R"("vlanTrunk": [{"id": 100}, {"minID": 300, "maxID": 302}])", "198.51.100.35/24").exit_code == 0);
  REQUIRE(add_pod(fx, node, "keep1", R"("vlan": 100, "preserveDefaultVlan": true)", "198.51.100.36/24").exit_code == 0);

  CHECK(link_detail("", "brt")["linkinfo"]["info_data"]["vlan_filtering"].GetInt() == 1);
  CHECK(port_vlans(host_end("v100a")) == std::vector<std::string>{"100PU"});           // default VLAN 1 removed
  CHECK(port_vlans(host_end("trunk")) == std::vector<std::string>{"1PU", "100", "300", "301", "302"});
  CHECK(port_vlans(host_end("keep1")) == std::vector<std::string>{"1U", "100PU"});      // VID 1 kept, PVID moved to 100
  CHECK(port_vlans(host_end("untagged")) == std::vector<std::string>{"1PU"});           // the kernel's default

  CHECK(pings("v100a", "198.51.100.32", "net1"));
  CHECK(pings("v100a", "198.51.100.36", "net1"));
  CHECK_FALSE(pings("v100a", "198.51.100.33", "net1", 1));
  CHECK_FALSE(pings("v100a", "198.51.100.34", "net1", 1));
  CHECK(pings("untagged", "198.51.100.35", "net1"));  // the trunk's native VLAN 1
  // Tagged VLAN 100 on the trunk pod: an 802.1Q link inside it reaches the VLAN 100 pods.
  REQUIRE(sh("ip -n trunk link add link net1 name net1.100 type vlan id 100 && ip -n trunk addr add 192.0.2.35/24 dev net1.100 && "
             "ip -n trunk link set net1.100 up && ip -n v100a addr add 192.0.2.31/24 dev net1").exit_code == 0);
  CHECK(pings("trunk", "192.0.2.31", "net1.100"));

  Proc check = fx.run("CHECK", "ctr-v100a", "/run/netns/v100a", "default", "v100a", fx.config(R"("prevResult": )" + a.out));
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(sh("bridge vlan del dev " + host_end("v100a") + " vid 100").exit_code == 0);
  Proc broken = fx.run("CHECK", "ctr-v100a", "/run/netns/v100a", "default", "v100a", fx.config(R"("prevResult": )" + a.out));
  CHECK(broken.exit_code != 0);
  CHECK(broken.out.find("lacks VLAN 100") != std::string::npos);
  for (const char* pod : {"v100a", "v100b", "v200", "untagged", "trunk", "keep1"}) CHECK(del_pod(fx, pod).exit_code == 0);
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE("bridge vlan with isGateway: the gateway address is on <bridge>.<vlan>, a VLAN port of the bridge; pods reach it") {
  Node node;
  PodFixture fx(node);
  Proc a = add_pod(fx, node, "gwa", R"("vlan": 100, "isGateway": true)", "198.51.100.41/24");
  INFO(a.out);
  REQUIRE(a.exit_code == 0);
  REQUIRE(add_pod(fx, node, "gwb", R"("vlan": 100, "isGateway": true)", "198.51.100.42/24").exit_code == 0);
  CHECK(global_addr("", "brt.100") == "198.51.100.1");
  CHECK(global_addr("", "brt").empty());
  // Reported as an interface of the attachment's result (the network-status lists the pod's only).
  Proc check = fx.run("CHECK", "ctr-gwa", "/run/netns/gwa", "default", "gwa", fx.config());
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  CHECK(read_file(fx.state() + "/containers/ctr-gwa:eth0/1-net1.json").find("\"brt.100\"") != std::string::npos);
  // brt.100's peer is a port of brt with VLAN 100 as PVID.
  const std::string peer_name = link_detail("", "brt.100")["link"].GetString();
  CHECK(std::string(link_detail("", peer_name)["master"].GetString()) == "brt");
  CHECK(port_vlans(peer_name) == std::vector<std::string>{"100PU"});
  CHECK(pings("gwa", "198.51.100.1", "net1"));
  CHECK(pings("gwb", "198.51.100.1", "net1"));
  CHECK(del_pod(fx, "gwa").exit_code == 0);
  CHECK(del_pod(fx, "gwb").exit_code == 0);
  CHECK(link_names("").count("brt.100") == 1);  // shared by the VLAN's pods, as the reference leaves it
  CHECK(no_records(fx));
}

TEST_CASE(
    "bridge forceAddress and isGateway on a node's bridge: a SIGKILL after any intent, then DEL, leaves its addresses "
    "as they were") {
  Node node;
  PodFixture fx(node);
  REQUIRE(sh("ip link add brt type bridge && ip addr add 198.51.100.200/24 dev brt && ip link set brt up").exit_code ==
          0);
  auto v4_of_brt = [] {
    std::vector<std::string> out;
    auto d = ip_json("-4 addr show dev brt");
    for (auto& a : d[0]["addr_info"].GetArray())
      out.push_back(std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt()));
    return out;
  };
  const auto before = v4_of_brt();
  REQUIRE(before == std::vector<std::string>{"198.51.100.200/24"});
  fx.add_nad("default", "kill-net",
             bridge_nad(R"("isGateway": true, "forceAddress": true, "ipMasq": true)", "198.51.100.5/24"));
  fx.add_pod("default", "kill", R"([{"name": "kill-net", "interface": "net1"}])");
  const std::string pod = node.add_netns("kill");
  unsigned killed = 0;
  for (unsigned step = 1; step < 20; ++step) {
    CAPTURE(step);
    Proc add = fx.run_with(plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD", "ctr-kill",
                           pod, "default", "kill", fx.config());
    if (add.exit_code == 0) {  // past the last intent: forceAddress replaced the address, which stays (shared bridge)
      CHECK(v4_of_brt() == std::vector<std::string>{"198.51.100.1/24"});
      REQUIRE(fx.run("DEL", "ctr-kill", pod, "default", "kill", fx.config()).exit_code == 0);
      CHECK(v4_of_brt() == std::vector<std::string>{"198.51.100.1/24"});
      break;
    }
    REQUIRE_MESSAGE(add.exit_code == 128 + SIGKILL, add.out << add.err);
    ++killed;
    Proc del = fx.run("DEL", "ctr-kill", pod, "default", "kill", fx.config());
    REQUIRE_MESSAGE(del.exit_code == 0, del.out << del.err);
    CHECK(v4_of_brt() == before);
  }
  // veth (+ its release), the address put back, the gateway's removal, masquerade: killed after each.
  CHECK(killed >= 4);
}

TEST_CASE(
    "bridge's steps through a RecordingExecutor: each recorded with its exact inverse in order, the IPAM's "
    "release announced with the veth; running the inverses newest first leaves the node as before") {
  Node node;
  const std::string pod = node.add_netns("rec");
  auto nl = plumb::netlink::Socket::open();
  auto pod_ns = plumb::netns::Netns::open(pod);
  REQUIRE(nl);
  REQUIRE(pod_ns);
  auto pod_nl = plumb::netlink::Socket::open_in(pod_ns->fd());
  REQUIRE(pod_nl);
  const auto links_before = link_names("");
  plumb::drivers::steps::RecordingExecutor rec(/*apply=*/true);
  plumb::drivers::Context ctx;
  ctx.container_id = "ctr-rec";
  ctx.ifname = "net1";
  ctx.network = "rec-net";
  ctx.netns_path = pod;
  ctx.node = &*nl;
  ctx.pod = &*pod_nl;
  ctx.pod_ns = &*pod_ns;
  ctx.executor = &rec;
  auto conf = plumb::json::parse(R"({"type": "bridge", "bridge": "brr", "isGateway": true, "hairpinMode": true,
    "ipam": {"type": "static", "addresses": [{"address": "198.51.100.5/24"}]}})",
                                 "test");
  REQUIRE(conf);
  auto r = plumb::test::add_plugin(ctx, *conf, nullptr);
  REQUIRE_MESSAGE(r, r.error().text());
  const std::string host = r->interfaces.at(1).name;
  CHECK(rec.made_veths().at("net1").host.name == host);  // kept for the chain's later plugins
  std::vector<std::string> made;
  for (const auto& m : rec.made()) {
    made.push_back(m.step + " " + (m.inverse ? plumb::json::dump(plumb::drivers::undo::encode(m.inverse->op)) : "-") +
                   (m.inverse && m.inverse->rollback_only ? " rollback" : ""));
  }
  const std::string release =
      R"({"op":"ipam_release","ipam":{"type":"static","addresses":[{"address":"198.51.100.5/24"}]},"network":"rec-net",)"
      R"("ifname":"net1"})";
  CHECK(made == std::vector<std::string>{
                    R"(create_bridge {"op":"bridge_del_if_unused","name":"brr"} rollback)",
                    "set_up_bridge -",
                    "announce " + release,
                    R"(create_pod_veth {"op":"link_del","where":"node","name":")" + host + R"("})",
                    "set_bridge_port -",
                    "allocate_addresses -",
                    R"(add_node_address {"op":"addr_del","ifname":"brr","prefix":"198.51.100.1/24","bridge":"brr",)"
                    R"("port":")" +
                        host + R"(","ifUnknown":"skip"} rollback)",
                    "enable_forwarding -",
                    "set_up_pod_link -",
                    "add_own_link_address -",
                    "set_up_pod_link -",
                });
  CHECK(sh("cat /sys/class/net/" + host + "/brport/hairpin_mode").out == "1\n");
  // The inverses, newest first, as a rollback runs them: nothing of the ADD is left.
  for (auto m = rec.made().rbegin(); m != rec.made().rend(); ++m) {
    if (!m->inverse) continue;
    CAPTURE(m->step);
    REQUIRE(plumb::drivers::undo::run(ctx, m->inverse->op));
  }
  CHECK(link_names("") == links_before);
  CHECK(link_names("rec") == std::set<std::string>{"lo"});
}

TEST_CASE(
    "bridge with a warm worker's node watch: a later ADD asks neither for the gateway address nor for forwarding; "
    "the gateway address removed and forwarding turned off by another party between two ADDs are repaired by the "
    "next") {
  Node node;
  // No IPv6 link-local address on the new bridge: its arrival (and DAD's end) would be a change
  // of the bridge's addresses at a moment the test does not choose.
  REQUIRE(sh("sysctl -qw net.ipv6.conf.default.addr_gen_mode=1").exit_code == 0);
  auto nl = plumb::netlink::Socket::open();
  REQUIRE(nl);
  auto watch = plumb::netconf::Watch::open();
  REQUIRE(watch);
  auto conf = plumb::json::parse(R"({"type": "bridge", "bridge": "brw", "isGateway": true,
    "ipam": {"type": "static", "addresses": [{"address": "198.51.100.5/24"}]}})",
                                 "test");
  REQUIRE(conf);
  // One ADD of pod `pod` (net1, its own namespace); returns its sendto() calls.
  auto add = [&](const std::string& pod, plumb::netconf::Watch* w) {
    const std::string path = node.add_netns(pod);
    auto pod_ns = plumb::netns::Netns::open(path);
    REQUIRE(pod_ns);
    auto pod_nl = plumb::netlink::Socket::open_in(pod_ns->fd());
    REQUIRE(pod_nl);
    plumb::drivers::steps::RecordingExecutor rec(/*apply=*/true);
    plumb::drivers::Context ctx;
    ctx.container_id = "ctr-" + pod;
    ctx.ifname = "net1";
    ctx.network = "warm-net";
    ctx.netns_path = path;
    ctx.node = &*nl;
    ctx.pod = &*pod_nl;
    ctx.pod_ns = &*pod_ns;
    ctx.executor = &rec;
    ctx.node_watch = w;
    return count_syscalls("sendto", [&] {
      auto r = plumb::test::add_plugin(ctx, *conf, nullptr);
      REQUIRE_MESSAGE(r, r.error().text());
    });
  };
  (void)add("w1", watch->get());  // creates the bridge, its gateway address, turns forwarding on
  (void)add("w2", watch->get());  // sees its predecessor's changes: asks, remembers
  const long warm = add("w3", watch->get());
  const long cold = add("w4", nullptr);
  CHECK(warm + 2 == cold);  // no RTM_GETADDR dump, no RTM_GETNETCONF

  REQUIRE(sh("ip addr del 198.51.100.1/24 dev brw && sysctl -qw net.ipv4.ip_forward=0").exit_code == 0);
  (void)add("w5", watch->get());
  CHECK(sh("ip -4 -o addr show dev brw").out.find("inet 198.51.100.1/24") != std::string::npos);
  CHECK(sh("sysctl -n net.ipv4.ip_forward").out == "1\n");
  (void)add("w6", watch->get());           // sees the repairs (its own changes): asks again
  CHECK(add("w7", watch->get()) == warm);  // remembered again
}
