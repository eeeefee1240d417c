// Pods on the full-kernel guest's real VFs (tests/support/igb_vfs.hpp; the sriov driver's keys on
// them: sriov_igb_test.cpp): traffic between pods on VFs of the two PFs (the NICs share one
// internal hub) and VLAN isolation, with bounded pings; a VF bound to vfio-pci behind the emulated
// IOMMU (DPDK mode); kubelet's device IDs from a fake kubelet naming the real VFs; the pod-side
// bandwidth programs on an igbvf netdev with real traffic, shaping judged by a ratio of what
// arrives.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "tests/drivers/bandwidth_helpers.hpp"
#include "tests/support/fake_kubelet.hpp"
#include "tests/support/full_kernel.hpp"
#include "tests/support/igb_node.hpp"

using namespace plumb::test;
using namespace plumb::test::igb;

FULL_KERNEL_CASE(
    "[igb] pods on VFs of the two PFs reach each other on port VLAN 100; a pod on VLAN 200 is isolated from "
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

FULL_KERNEL_CASE(
    "[igb] DPDK mode: a VF bound to vfio-pci (IOMMU group, /dev/vfio/<group>) attaches without moving "
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
  // As sriov-network-device-plugin hands it out: a resource, no deviceID in the NAD.
  FakeKubelet kubelet(node.dir() + "/kubelet");
  kubelet.set_state(R"({"pods":[)" + FakeKubelet::pod("default", "pod-d", {{"intel.com/igb_dpdk", {vf}}}) + "]}");
  n.fx.write_nad_file("default-sriov-dpdk", R"(apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: sriov-dpdk
  namespace: default
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/igb_dpdk
spec:
  config: '{"cniVersion":"1.0.0","type":"sriov","vlan":300}'
)");
  n.fx.add_pod("default", "pod-d", "sriov-dpdk");
  node.add_netns("pod-d");
  const std::string conf = n.config(R"("podResourcesSocket": ")" + kubelet.socket() + "\"");
  Proc add = n.fx.run("ADD", "ctr-pod-d", "/run/netns/pod-d", "default", "pod-d", conf);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(parse(igb.vfinfo(0, 1))["vlan_list"][0]["vlan"].GetUint() == 300);
  CHECK(igb.vf_driver(0, 1) == "vfio-pci");
  CHECK(link_names("pod-d") == std::set<std::string>{"lo"});
  CHECK(link_names("") == links_before);
  const std::string status = n.fx.status_of("default", "pod-d");
  CHECK_MESSAGE(status.find(R"("pci":{"pci-address":")" + vf + R"(","pf-pci-address":")" + igb.pf(0).pci + "\"}") !=
                    std::string::npos,
                status);
  Proc del = n.fx.run("DEL", "ctr-pod-d", "/run/netns/pod-d", "default", "pod-d", conf);
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(igb.vfinfo(0, 1) == before);
  CHECK(igb.vf_driver(0, 1) == "vfio-pci");
  CHECK(std::filesystem::exists("/dev/vfio/" + group));
  CHECK(n.allocations().empty());
}

FULL_KERNEL_CASE(
    "[igb, fake kubelet] a NAD with only resourceName: kubelet's device IDs (the real VFs' PCI addresses) "
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
    CHECK_MESSAGE(
        status.find(R"("pci":{"pci-address":")" + vf + R"(","pf-pci-address":")" + pf + "\"}") != std::string::npos,
        status);
  }
  Proc del = n.fx.run("DEL", "ctr-pod-r", "/run/netns/pod-r", "default", "pod-r",
                      n.config(R"("podResourcesSocket": ")" + kubelet.socket() + "\""));
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(igb.vf_netdev(0, 1) == nd_a);
  CHECK(igb.vf_netdev(1, 1) == nd_b);
}

FULL_KERNEL_CASE(
    "[igb] bandwidth on a VF: the pod-side programs on the real igbvf netdev shape what the pod sends; the "
    "same burst from an unshaped pod gets through several times as much") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  PrivateBpffs fs(node);
  const std::string conf = n.config(R"("bpffsDir": ")" + fs.dir() + R"(/plumb")");
  auto nad = [&](const std::string& name, const std::string& vf, const std::string& addr) {
    n.fx.add_nad("default", name,
                 R"({"cniVersion":"1.0.0","name":")" + name + R"(","plugins":[
        {"type":"sriov","deviceID":")" +
                     vf + R"(","ipam":{"type":"static","addresses":[{"address":")" + addr + R"("}]}},
        {"type":"bandwidth","capabilities":{"bandwidth":true}}]})");
  };
  nad("bw-a", igb.vf_pci(0, 0), "198.51.100.41/24");  // shaped sender
  nad("bw-c", igb.vf_pci(0, 1), "198.51.100.43/24");  // unshaped sender
  nad("bw-b", igb.vf_pci(1, 0), "198.51.100.42/24");  // the receiver, on the other PF
  const std::string limits =
      R"("bandwidth": {"egressRate": 100000, "egressBurst": 20000, "ingressRate": 100000, "ingressBurst": 20000})";
  n.fx.add_pod("default", "pod-a", R"([{"name": "bw-a", )" + limits + "}]");
  n.fx.add_pod("default", "pod-c", "bw-c");
  n.fx.add_pod("default", "pod-b", "bw-b");
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) {
    node.add_netns(pod);
    Proc add = n.fx.run("ADD", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, conf);
    INFO(pod, ": ", add.out, add.err);
    REQUIRE(add.exit_code == 0);
  }
  CHECK(sh("ip netns exec pod-a tc -j filter show dev net1 egress").out.find("\"bpf_name\"") != std::string::npos);
  CHECK(sh("ip netns exec pod-c tc -j qdisc show dev net1").out.find("clsact") == std::string::npos);
  REQUIRE(reaches("pod-a", "198.51.100.42"));
  REQUIRE(reaches("pod-c", "198.51.100.42"));
  // The same bounded burst (1500 datagrams of 1400 bytes, 2.1 MB: far beyond 100 kbit/s, its
  // burst and the shaper's queue) from each sender; what reaches the receiver's VF is counted there.
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
  MESSAGE("datagrams received from the shaped pod: ", shaped, ", from the unshaped one: ", unshaped);
  CHECK(shaped > 0);
  CHECK(unshaped >= 4 * shaped);
  for (const char* pod : {"pod-a", "pod-b", "pod-c"}) {
    CHECK(
        n.fx.run("DEL", std::string("ctr-") + pod, std::string("/run/netns/") + pod, "default", pod, conf).exit_code ==
        0);
  }
}
