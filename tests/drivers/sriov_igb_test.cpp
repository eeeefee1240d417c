// The sriov driver (drivers/sriov.cpp, drivers/vf_attach.cpp) on real VFs: the full-kernel guest's
// two Intel 82576 NICs (QEMU's igb, driven by the stock kernel's igb and igbvf), VFs made fresh for
// each case by tests/support/igb_vfs.hpp, the real plumb binary run as a runtime runs it. What the
// PF reports is read back with `ip -j -d link` (vfinfo_list), what the pod sees with `ip -j` in
// the pod. The node is the guest's initial network namespace, where PCI drivers register netdevs
// (igb_vfs.hpp says why). Pods, traffic, DPDK mode, kubelet's devices and bandwidth on these VFs:
// sriov_igb_pod_test.cpp.
#include <doctest/doctest.h>
#include <signal.h>

#include <set>
#include <string>

#include "tests/support/full_kernel.hpp"
#include "tests/support/igb_node.hpp"

using namespace plumb::test;
using namespace plumb::test::igb;

FULL_KERNEL_CASE(
    "[igb] SR-IOV ADD with every key igb takes (mac, vlan, vlanQoS, spoofchk, trust, max_tx_rate): the PF "
    "reports each, the pod's VF netdev has the MAC asked for; CHECK passes; DEL returns the netdev under "
    "its name and MAC with the PF-side settings as they were, no MAC pinned") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  const VfSnap before = snap(igb, 0, 0);
  n.nad("sriov-a",
        R"("deviceID":")" + vf +
            R"(","mac":"02:00:00:33:00:01","vlan":100,"vlanQoS":3,"spoofchk":"off",)"
            R"("trust":"on","max_tx_rate":100)",
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

FULL_KERNEL_CASE(
    "[igb] a VF reused after DEL: each ADD's pod sees the MAC it asked for (the VF driver reloaded when the "
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

FULL_KERNEL_CASE(
    "[igb] keys igb refuses (link_state, min_tx_rate, vlanProto 802.1ad) fail the ADD with a clear CNI error "
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

FULL_KERNEL_CASE(
    "[igb] SIGKILL after every persisted intent of an SR-IOV ADD with a MAC (plumb-faulty): the following "
    "DEL returns the VF as it was") {
  Node node;
  IgbVfs igb;
  IgbNode n(node, igb);
  const std::string vf = igb.vf_pci(0, 0);
  const std::string own = igb.vf_netdev(0, 0);
  REQUIRE(sh("ip link set dev " + own + " address 02:00:00:5e:00:10 && ip link set dev " + own + " up").exit_code == 0);
  const VfSnap before = snap(igb, 0, 0);
  n.nad("sriov-a", R"("deviceID":")" + vf + R"(","mac":"02:00:00:33:00:01","vlan":100,"trust":"on")",
        "198.51.100.11/24");
  n.fx.add_pod("default", "pod-k", "sriov-a");
  const std::string pod = node.add_netns("pod-k");
  unsigned killed = 0;
  for (unsigned step = 1; step < 30; ++step) {
    CAPTURE(step);
    Proc add = n.fx.run_with(plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD",
                             "ctr-pod-k", pod, "default", "pod-k", n.config());
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
