// The sriov driver (drivers/sriov.cpp, drivers/vf_attach.cpp) on real VFs: the full-kernel guest's
// two Intel 82576 NICs (QEMU's igb, driven by the stock kernel's igb and igbvf; an emulated IOMMU
// for vfio-pci), VFs made fresh for each case by tests/support/igb_vfs.hpp, the real plumb binary
// run as a runtime runs it. What the PF reports is read back with `ip -j -d link` (vfinfo_list),
// what the pod sees with `ip -j` in the pod, traffic with bounded pings between pods on VFs of
// the two PFs (the NICs share one internal hub). The node is the guest's initial network
// namespace, where PCI drivers register netdevs (igb_vfs.hpp says why).
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "tests/drivers/bandwidth_helpers.hpp"
#include "tests/support/fake_kubelet.hpp"
#include "tests/support/full_kernel.hpp"
#include "tests/support/igb_vfs.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb::test;

namespace {

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

/// A link's MAC, "" when it does not exist (ns "" = the node).
std::string mac_of(const std::string& ns, const std::string& dev) {
  Proc p = sh("ip -j " + (ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + dev + " 2>/dev/null");
  if (p.exit_code != 0) return {};
  return parse(p.out)[0]["address"].GetString();
}

/// The VF's PF-side report without its MAC (igb reports the VF's own MAC there once the VF has
/// set it: DEL sets the netdev's own MAC back, so only the other settings compare exactly).
std::string settings_but_mac(const std::string& vfinfo) {
  auto d = parse(vfinfo);
  d.RemoveMember("address");
  return IgbVfs::json_text(d);
}

/// A node on the guest's real VFs with plumb configured: a loopback-only default network (nothing
/// of it in the guest's namespace), device-info under the case's directory.
struct IgbNode {
  Node& node;
  IgbVfs& igb;
  PodFixture fx;
  IgbNode(Node& n, IgbVfs& i) : node(n), igb(i), fx(n) {
    write_file(fx.default_conflist(), R"({"cniVersion":"1.0.0","name":"default-net","plugins":[{"type":"loopback"}]})");
  }
  std::string config(const std::string& extra = "") const {
    return fx.config(R"("deviceInfoDir": ")" + node.dir() + R"(/devinfo")" + (extra.empty() ? "" : ", " + extra));
  }
  /// A NAD `name` of type sriov with `keys` (JSON members) and a static address.
  void nad(const std::string& name, const std::string& keys, const std::string& address) const {
    fx.add_nad("default", name, R"({"cniVersion":"1.0.0","type":"sriov",)" + keys +
                                    R"(,"ipam":{"type":"static","addresses":[{"address":")" + address + R"("}]}})");
  }
  Proc run(const std::string& verb, const std::string& pod) const {
    return fx.run(verb, "ctr-" + pod, "/run/netns/" + pod, "default", pod, config());
  }
  /// Files left in the VF allocation directory (locks aside).
  std::vector<std::string> allocations() const {
    std::vector<std::string> out;
    for (auto& f : PodFixture::files_under(fx.state() + "/sriov")) {
      if (!f.ends_with(".lock")) out.push_back(f);
    }
    return out;
  }
};

/// What a VF looks like from the node: its netdev (name, MAC) and what its PF reports.
struct VfSnap {
  std::string netdev, mac, vfinfo;
};
VfSnap snap(const IgbVfs& igb, unsigned pf, unsigned vf) {
  VfSnap s{igb.vf_netdev(pf, vf), "", igb.vfinfo(pf, vf)};
  s.mac = mac_of("", s.netdev);
  return s;
}

/// The VF has no administrative MAC pinned: its netdev can change its own MAC (igb refuses that
/// while one is set), and set it back.
void check_not_pinned(const std::string& netdev, const std::string& mac) {
  Proc p = sh("ip link set dev " + netdev + " address 02:00:00:5e:77:77");
  INFO(netdev, ": ", p.err);
  CHECK(p.exit_code == 0);
  REQUIRE(sh("ip link set dev " + netdev + " address " + mac).exit_code == 0);
}

/// A VF as it was: same netdev name and MAC in the node, the same PF-side settings; its MAC on the
/// PF either as before or its own (the VF set it back on its netdev).
void check_returned(const IgbVfs& igb, unsigned pf, unsigned vf, const VfSnap& before) {
  VfSnap now = snap(igb, pf, vf);
  CHECK(now.netdev == before.netdev);
  CHECK(now.mac == before.mac);
  CHECK(settings_but_mac(now.vfinfo) == settings_but_mac(before.vfinfo));
  const std::string reported = parse(now.vfinfo)["address"].GetString();
  CHECK_MESSAGE((reported == parse(before.vfinfo)["address"].GetString() || reported == before.mac), now.vfinfo);
  check_not_pinned(now.netdev, now.mac);
}

/// Bounded: up to `tries` pings of one second from pod `ns` to `addr`; true at the first answer.
bool reaches(const std::string& ns, const std::string& addr, int tries = 10) {
  for (int i = 0; i < tries; ++i) {
    if (sh("ip netns exec " + ns + " ping -c 1 -W 1 " + addr + " >/dev/null 2>&1").exit_code == 0) return true;
  }
  return false;
}

}  // namespace

FULL_KERNEL_CASE("[igb] SR-IOV ADD with every key igb takes (mac, vlan, vlanQoS, spoofchk, trust, max_tx_rate): the PF "
                 "reports each, the pod's VF netdev has the MAC asked for; CHECK passes; DEL returns the netdev under "
                 "its name and MAC with the PF-side settings as they were, no MAC pinned") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  const VfSnap before = snap(igb, 0, 0);
  n.nad("sriov-a", R"("deviceID":")" + vf + R"(","mac":"02:00:00:33:00:01","vlan":100,"vlanQoS":3,"spoofchk":"off",)"
                   R"("trust":"on","max_tx_rate":100,"capabilities":{"CNIDeviceInfoFile":true})",
        "198.51.100.11/24");
  n.fx.add_pod("default", "pod-a", "sriov-a");
  node.add_netns("pod-a");
  Proc add = n.run("ADD", "pod-a");
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);

  auto v = parse(igb.vfinfo(0, 0));
  INFO(igb.vfinfo(0, 0));
  CHECK(std::string(v["address"].GetString()) == "02:00:00:33:00:01");
  CHECK(v["vlan_list"][0]["vlan"].GetUint() == 100);
  CHECK(v["vlan_list"][0]["qos"].GetUint() == 3);
  CHECK(v["rate"]["max_tx"].GetUint() == 100);
  CHECK_FALSE(v["spoofchk"].GetBool());
  CHECK(v["trust"].GetBool());
  CHECK(igb.vf_netdev(0, 0).empty());  // moved out of the node
  CHECK(mac_of("pod-a", "net1") == "02:00:00:33:00:01");
  CHECK(ipv4_of("pod-a", "net1") == "198.51.100.11/24");
  const std::string status = n.fx.status_of("default", "pod-a");
  CHECK_MESSAGE(status.find(R"("pci-address":")" + vf + "\"") != std::string::npos, status);
  CHECK_MESSAGE(status.find(R"("pf-pci-address":")" + igb.pf(0).pci + "\"") != std::string::npos, status);

  Proc check = n.run("CHECK", "pod-a");
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);

  Proc del = n.run("DEL", "pod-a");
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  check_returned(igb, 0, 0, before);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(n.allocations().empty());
}

FULL_KERNEL_CASE("[igb] a VF reused after DEL: each ADD's pod sees the MAC it asked for (the VF driver reloaded when the "
                 "PF's MAC does not reach it), and no DEL leaves a MAC pinned") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  // The VF in use before: up, its own MAC set (igb then reports it as the VF's MAC).
  const std::string own = igb.vf_netdev(0, 0);
  REQUIRE(sh("ip link set dev " + own + " address 02:00:00:5e:00:10 && ip link set dev " + own + " up").exit_code == 0);
  const VfSnap before = snap(igb, 0, 0);
  node.add_netns("pod-a");
  for (const char* mac : {"02:00:00:33:00:01", "02:00:00:33:00:02", "02:00:00:33:00:03"}) {
    CAPTURE(mac);
    n.nad("sriov-a", R"("deviceID":")" + vf + R"(","mac":")" + mac + "\"", "198.51.100.11/24");
    n.fx.add_pod("default", "pod-a", "sriov-a");
    Proc add = n.run("ADD", "pod-a");
    INFO(add.out, add.err);
    REQUIRE(add.exit_code == 0);
    CHECK(mac_of("pod-a", "net1") == mac);
    CHECK(std::string(parse(igb.vfinfo(0, 0))["address"].GetString()) == mac);
    Proc del = n.run("DEL", "pod-a");
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    check_returned(igb, 0, 0, before);
  }
}

FULL_KERNEL_CASE("[igb] keys igb refuses (link_state, min_tx_rate, vlanProto 802.1ad) fail the ADD with a clear CNI error "
                 "and leave the VF and the PF exactly as before, with no MAC pinned") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  const std::string own = igb.vf_netdev(0, 0);
  REQUIRE(sh("ip link set dev " + own + " address 02:00:00:5e:00:10 && ip link set dev " + own + " up").exit_code == 0);
  node.add_netns("pod-a");
  struct Refused {
    const char* keys;
    const char* says;
  } cases[] = {
      {R"("mac":"02:00:00:33:00:01","link_state":"enable")", "vf 0 state enable"},
      {R"("mac":"02:00:00:33:00:01","vlan":100,"min_tx_rate":10,"max_tx_rate":100)", "min_tx_rate 10"},
      {R"("mac":"02:00:00:33:00:01","vlan":100,"vlanProto":"802.1ad")", "proto 802.1ad"},
  };
  for (auto& c : cases) {
    CAPTURE(c.keys);
    const VfSnap before = snap(igb, 0, 0);
    n.nad("sriov-a", R"("deviceID":")" + vf + "\"," + c.keys, "198.51.100.11/24");
    n.fx.add_pod("default", "pod-a", "sriov-a");
    Proc add = n.run("ADD", "pod-a");
    INFO(add.out, add.err);
    REQUIRE(add.exit_code != 0);
    auto e = parse(add.out);
    CHECK(std::string(e["msg"].GetString()).find(c.says) != std::string::npos);
    CHECK(std::string(e["msg"].GetString()).find(vf) != std::string::npos);
    VfSnap after = snap(igb, 0, 0);
    CHECK(after.netdev == before.netdev);
    CHECK(after.mac == before.mac);
    CHECK(after.vfinfo == before.vfinfo);
    check_not_pinned(after.netdev, after.mac);
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    CHECK(n.allocations().empty());
    REQUIRE(n.run("DEL", "pod-a").exit_code == 0);
  }
}

FULL_KERNEL_CASE("[igb] pods on VFs of the two PFs reach each other on port VLAN 100; a pod on VLAN 200 is isolated from "
                 "both") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  n.nad("v100-a", R"("deviceID":")" + igb.vf_pci(0, 0) + R"(","vlan":100)", "198.51.100.11/24");
  n.nad("v100-b", R"("deviceID":")" + igb.vf_pci(1, 0) + R"(","vlan":100)", "198.51.100.12/24");
  n.nad("v200-c", R"("deviceID":")" + igb.vf_pci(1, 1) + R"(","vlan":200)", "198.51.100.13/24");
  for (auto [pod, net] : {std::pair{"pod-a", "v100-a"}, std::pair{"pod-b", "v100-b"}, std::pair{"pod-c", "v200-c"}}) {
    n.fx.add_pod("default", pod, net);
    node.add_netns(pod);
    Proc add = n.run("ADD", pod);
    INFO(pod, ": ", add.out, add.err);
    REQUIRE(add.exit_code == 0);
  }
  CHECK(reaches("pod-a", "198.51.100.12"));
  CHECK(reaches("pod-b", "198.51.100.11"));
  // pod-c's VF has link (it answers on its own VLAN to nobody, but its address is up): nothing
  // of VLAN 100 reaches it, nor it them.
  CHECK_FALSE(reaches("pod-a", "198.51.100.13", 3));
  CHECK_FALSE(reaches("pod-c", "198.51.100.12", 3));
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) CHECK(n.run("DEL", pod).exit_code == 0);
}

FULL_KERNEL_CASE("[igb] DPDK mode: a VF bound to vfio-pci (IOMMU group, /dev/vfio/<group>) attaches without moving "
                 "anything, its PF-side VLAN set and device-info written; DEL restores the VLAN and leaves it bound") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  igb.bind(0, 1, "vfio-pci");
  const std::string vf = igb.vf_pci(0, 1);
  const std::string group = std::filesystem::read_symlink("/sys/bus/pci/devices/" + vf + "/iommu_group").filename();
  REQUIRE(std::filesystem::exists("/dev/vfio/" + group));
  const std::string before = igb.vfinfo(0, 1);
  const auto links_before = link_names("");
  n.nad("sriov-dpdk", R"("deviceID":")" + vf + R"(","vlan":300)", "198.51.100.21/24");
  n.fx.add_pod("default", "pod-d", "sriov-dpdk");
  node.add_netns("pod-d");
  Proc add = n.run("ADD", "pod-d");
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(parse(igb.vfinfo(0, 1))["vlan_list"][0]["vlan"].GetUint() == 300);
  CHECK(igb.vf_driver(0, 1) == "vfio-pci");
  CHECK(link_names("pod-d") == std::set<std::string>{"lo"});
  CHECK(link_names("") == links_before);
  const std::string status = n.fx.status_of("default", "pod-d");
  CHECK_MESSAGE(status.find(R"("pci-address":")" + vf + "\"") != std::string::npos, status);
  Proc del = n.run("DEL", "pod-d");
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(igb.vfinfo(0, 1) == before);
  CHECK(igb.vf_driver(0, 1) == "vfio-pci");
  CHECK(std::filesystem::exists("/dev/vfio/" + group));
  CHECK(n.allocations().empty());
}

FULL_KERNEL_CASE("[igb] SIGKILL after every persisted intent of an SR-IOV ADD with a MAC (plumb-faulty): the following "
                 "DEL returns the VF as it was") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  const std::string own = igb.vf_netdev(0, 0);
  REQUIRE(sh("ip link set dev " + own + " address 02:00:00:5e:00:10 && ip link set dev " + own + " up").exit_code == 0);
  const VfSnap before = snap(igb, 0, 0);
  n.nad("sriov-a", R"("deviceID":")" + vf + R"(","mac":"02:00:00:33:00:01","vlan":100,"trust":"on")", "198.51.100.11/24");
  n.fx.add_pod("default", "pod-k", "sriov-a");
  const std::string pod = node.add_netns("pod-k");
  unsigned killed = 0;
  for (unsigned step = 1; step < 30; ++step) {
    CAPTURE(step);
    Proc add = n.fx.run_with(plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD", "ctr-pod-k",
                             pod, "default", "pod-k", n.config());
    const bool done = add.exit_code == 0;
    if (!done) {
      REQUIRE(add.exit_code == 128 + SIGKILL);
      ++killed;
    }
    Proc del = n.run("DEL", "pod-k");
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    VfSnap now = snap(igb, 0, 0);
    CHECK(now.netdev == before.netdev);
    CHECK(now.mac == before.mac);
    CHECK(settings_but_mac(now.vfinfo) == settings_but_mac(before.vfinfo));
    CHECK(link_names("pod-k") == std::set<std::string>{"lo"});
    CHECK(n.allocations().empty());
    if (done) break;
  }
  // claim, netdev return, PF settings, the reload: at least four kill points.
  CHECK(killed >= 4);
  check_returned(igb, 0, 0, before);
}

FULL_KERNEL_CASE("[igb, fake kubelet] a NAD with only resourceName: kubelet's device IDs (the real VFs' PCI addresses) "
                 "give the pod exactly those VFs, each with its device-info in network-status") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  FakeKubelet kubelet(node.dir() + "/kubelet");
  const std::string vf_a = igb.vf_pci(0, 1), vf_b = igb.vf_pci(1, 1);
  const std::string nd_a = igb.vf_netdev(0, 1), nd_b = igb.vf_netdev(1, 1);
  kubelet.set_state(R"({"pods":[)" + FakeKubelet::pod("default", "pod-r", {{"intel.com/igb_vf", {vf_a, vf_b}}}) + "]}");
  n.fx.write_nad_file("default-igb", R"(apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: igb
  namespace: default
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/igb_vf
spec:
  config: '{"cniVersion":"1.0.0","type":"sriov","vlan":100}'
)");
  n.fx.add_pod("default", "pod-r", R"([{"name":"igb"},{"name":"igb"}])");
  node.add_netns("pod-r");
  Proc add = n.fx.run("ADD", "ctr-pod-r", "/run/netns/pod-r", "default", "pod-r",
                      n.config(R"("podResourcesSocket": ")" + kubelet.socket() + "\""));
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  // The pod's interfaces are those VFs' netdevs (their parent device), gone from the node.
  auto parent = [](const std::string& dev) {
    return std::string(parse(sh("ip -n pod-r -j -d link show dev " + dev).out)[0]["parentdev"].GetString());
  };
  CHECK(parent("net1") == vf_a);
  CHECK(parent("net2") == vf_b);
  CHECK(igb.vf_netdev(0, 1).empty());
  CHECK(igb.vf_netdev(1, 1).empty());
  CHECK(parse(igb.vfinfo(0, 1))["vlan_list"][0]["vlan"].GetUint() == 100);
  CHECK(parse(igb.vfinfo(1, 1))["vlan_list"][0]["vlan"].GetUint() == 100);
  const std::string status = n.fx.status_of("default", "pod-r");
  for (auto [vf, pf] : {std::pair{vf_a, igb.pf(0).pci}, std::pair{vf_b, igb.pf(1).pci}}) {
    CHECK_MESSAGE(status.find(R"("pci":{"pci-address":")" + vf + R"(","pf-pci-address":")" + pf + "\"}") !=
                      std::string::npos,
                  status);
  }
  Proc del = n.fx.run("DEL", "ctr-pod-r", "/run/netns/pod-r", "default", "pod-r",
                      n.config(R"("podResourcesSocket": ")" + kubelet.socket() + "\""));
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(igb.vf_netdev(0, 1) == nd_a);
  CHECK(igb.vf_netdev(1, 1) == nd_b);
}

FULL_KERNEL_CASE("[igb] bandwidth on a VF: the pod-side programs on the real igbvf netdev shape what the pod sends; the "
                 "same burst from an unshaped pod gets through several times as much") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  PrivateBpffs fs(node);
  const std::string conf = n.config(R"("bpffsDir": ")" + fs.dir() + R"(/plumb")");
  auto nad = [&](const std::string& name, const std::string& vf, const std::string& addr) {
    n.fx.add_nad("default", name, R"({"cniVersion":"1.0.0","name":")" + name + R"(","plugins":[
        {"type":"sriov","deviceID":")" + vf + R"(","ipam":{"type":"static","addresses":[{"address":")" + addr + R"("}]}},
        {"type":"bandwidth","capabilities":{"bandwidth":true}}]})");
  };
  nad("bw-a", igb.vf_pci(0, 0), "198.51.100.41/24");  // shaped sender
  nad("bw-c", igb.vf_pci(0, 1), "198.51.100.43/24");  // unshaped sender
  nad("bw-b", igb.vf_pci(1, 0), "198.51.100.42/24");  // the receiver, on the other PF
  const std::string limits =
      R"("bandwidth": {"egressRate": 1000000, "egressBurst": 100000, "ingressRate": 1000000, "ingressBurst": 100000})";
  n.fx.add_pod("default", "pod-a", R"([{"name": "bw-a", )" + limits + "}]");
  n.fx.add_pod("default", "pod-c", "bw-c");
  n.fx.add_pod("default", "pod-b", "bw-b");
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) {
    node.add_netns(pod);
    Proc add = n.fx.run("ADD", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, conf);
    INFO(pod, ": ", add.out, add.err);
    REQUIRE(add.exit_code == 0);
  }
  CHECK(sh("ip netns exec pod-a tc -j filter show dev net1 egress").out.find("tb_host_egress") != std::string::npos);
  CHECK(sh("ip netns exec pod-c tc -j qdisc show dev net1").out.find("clsact") == std::string::npos);
  REQUIRE(reaches("pod-a", "198.51.100.42"));
  REQUIRE(reaches("pod-c", "198.51.100.42"));
  // The same bounded burst (1500 datagrams of 1400 bytes, 2.1 MB: far beyond 1 Mbit/s and its
  // burst) from each sender; what reaches the receiver's VF is counted there.
  auto received = [] {
    return parse(sh("ip -n pod-b -j -s link show dev net1").out)[0]["stats64"]["rx"]["packets"].GetUint64();
  };
  auto burst_from = [&](const std::string& pod) {
    const uint64_t start = received();
    bandwidth::udp_blast("/run/netns/" + pod, "198.51.100.42", 1500);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the shaper's queue drains; not measured
    return received() - start;
  };
  const uint64_t shaped = burst_from("pod-a"), unshaped = burst_from("pod-c");
  INFO("received from the shaped pod ", shaped, ", from the unshaped one ", unshaped);
  CHECK(shaped > 0);
  CHECK(unshaped >= 4 * shaped);
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) {
    CHECK(n.fx.run("DEL", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, conf).exit_code == 0);
  }
}
