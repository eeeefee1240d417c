// The sriov driver (drivers/sriov.cpp) called in-process, each case in a fresh private node: the VF
// netdevs are real veth ends in the node namespace, so moves, renames, MAC/MTU restores and
// rollbacks run against the real kernel ([kernel netdevs]); the PF side goes through a recording
// PfOps ([recorded PF]) because this kernel has no SR-IOV; the sysfs tree is a fake one per case
// (tests/support/vf_harness.hpp). Kernel state is read back independently with `ip -j`; the
// announcements after the VF comes up are read off the veth peer with an AF_PACKET listener.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/packet_listener.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::vf;
using plumb::drivers::vf_attach::read_allocation;
using Kind = VfSetting::Kind;

TEST_CASE("[kernel netdevs, recorded PF] SR-IOV VF: settings saved and applied in sriov-cni's order, netdev moved and renamed "
          "with MAC/MTU, IPAM, device-info; DEL restores settings first, then name, MAC, MTU and namespace") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  a.with_device_info("intel.com/sriov_netdevice", "0000:03:00.2");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"vlanQoS":3,"mac":"02:11:22:33:44:55",
      "spoofchk":"off","trust":"on","link_state":"enable","min_tx_rate":10,"max_tx_rate":1000,"mtu":1300)",
                                      b.ipam("198.51.100.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{
                        "get pf0 vf 1",
                        "set pf0 vf 1 vlan 100 qos 3",
                        "set pf0 vf 1 mac 02:11:22:33:44:55",
                        "set pf0 vf 1 min_tx_rate 10 max_tx_rate 1000",
                        "set pf0 vf 1 spoofchk off",
                        "set pf0 vf 1 trust on",
                        "set pf0 vf 1 state enable",
                    });
  // The kernel: the VF netdev is in the pod under its new name, MAC and MTU, up, addressed.
  CHECK_FALSE(ip_link("", "vfnd1"));
  auto l = ip_link("pod1", "net1");
  REQUIRE(l);
  CHECK(l->mac == "02:11:22:33:44:55");
  CHECK(l->mtu == 1300);
  CHECK(l->up);
  auto addrs = ip_addrs("pod1", "net1");
  REQUIRE(addrs.size() == 1);
  CHECK(addrs[0].rfind("198.51.100.", 0) == 0);
  REQUIRE(r->interfaces.size() == 1);
  CHECK(r->interfaces[0].pci_id == "0000:03:00.2");
  CHECK(r->interfaces[0].sandbox == "/run/netns/pod1");
  CHECK(r->ips[0].interface == 0);
  // No device plugin file: the driver wrote the attachment's file from what it found.
  CHECK(test::read_file(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","pf-pci-address":"0000:03:00.0"}})");
  auto alloc = read_allocation(b.state(), "0000:03:00.2");
  REQUIRE(alloc);
  REQUIRE(alloc->has_value());
  CHECK((*alloc)->container_id == "ctr1");
  CHECK((*alloc)->mode == "netdev");
  // Write-ahead order: the restore is registered after the netdev return, so it runs first.
  CHECK(a.undo_ops() == std::vector<std::string>{"devinfo_remove", "sriov.release", "sriov.return_netdev", "sriov.restore_vf",
                                                 "ipam_release"});

  b.pf.log.clear();
  REQUIRE(a.unwind(true));
  CHECK(b.pf.log == std::vector<std::string>{
                        "set pf0 vf 1 vlan 0 qos 0",
                        "set pf0 vf 1 spoofchk on",
                        "set pf0 vf 1 mac 00:00:00:00:00:00",
                        "set pf0 vf 1 trust off",
                        "set pf0 vf 1 min_tx_rate 0 max_tx_rate 0",
                        "set pf0 vf 1 state auto",
                    });
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  auto back = ip_link("", "vfnd1");
  REQUIRE(back);
  CHECK(back->mac == "02:aa:00:00:00:01");
  CHECK(back->mtu == 1400);
  CHECK_FALSE(ip_link("pod1", "net1"));
  CHECK_FALSE(read_allocation(b.state(), "0000:03:00.2")->has_value());
  CHECK_FALSE(std::filesystem::exists(a.plan.file));
}

TEST_CASE("[kernel netdevs, recorded PF] CNI_ARGS MAC= (sriov-cni's README: \"IgnoreUnknown=1;IP=..;VF=1;MAC=..\") overrides the "
          "config's mac; runtimeConfig.mac overrides both") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  a.ctx.cni_args = {{"IgnoreUnknown", "1"}, {"VF", "1"}, {"MAC", "66:D8:02:77:AA:AA"}};
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","mac":"02:11:22:33:44:55")", b.ipam("198.51.100.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{"get pf0 vf 1", "set pf0 vf 1 mac 66:d8:02:77:aa:aa"});
  REQUIRE(ip_link("pod1", "net1"));
  CHECK(ip_link("pod1", "net1")->mac == "66:d8:02:77:aa:aa");
  REQUIRE(a.unwind(true));

  b.pf.log.clear();
  Att rc(b, "ctr2", "net1", "pod1");
  rc.ctx.cni_args = {{"MAC", "66:d8:02:77:aa:aa"}};
  r = rc.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","runtimeConfig":{"mac":"02:00:00:00:00:07"})", b.ipam("198.51.100.0/24")));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{"get pf0 vf 1", "set pf0 vf 1 mac 02:00:00:00:00:07"});
  REQUIRE(rc.unwind(true));

  Att bad(b, "ctr3", "net1", "pod1");
  bad.ctx.cni_args = {{"MAC", "66:d8"}};
  r = bad.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2")", b.ipam("198.51.100.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("CNI_ARGS MAC \"66:d8\"") != std::string::npos);
}

TEST_CASE("[kernel netdevs, recorded PF] SR-IOV VF bound to vfio-pci: PF settings and IPAM only, no netdev; the mode is "
          "recorded so DEL only restores the PF side") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net2", "pod1");
  // The device plugin's file exists: it is copied and completed.
  test::write_file(devinfo::dp_file(b.devinfo_base(), "intel.com/sriov_dpdk", "0000:03:00.3"),
                   R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3"}})");
  a.with_device_info("intel.com/sriov_dpdk", "0000:03:00.3");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.3","vlan":200)", b.ipam("198.51.100.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{"get pf0 vf 2", "set pf0 vf 2 vlan 200 qos 0"});
  CHECK_FALSE(ip_link("pod1", "net2"));
  CHECK(ip_link("", "vfnd1"));  // the other VF's netdev is not touched
  REQUIRE(r->interfaces.size() == 1);
  CHECK(r->interfaces[0].name == "net2");
  CHECK(r->interfaces[0].pci_id == "0000:03:00.3");
  REQUIRE(r->ips.size() == 1);
  CHECK((*read_allocation(b.state(), "0000:03:00.3"))->mode == "userspace");
  CHECK(a.undo_ops() == std::vector<std::string>{"devinfo_remove", "sriov.release", "sriov.restore_vf", "ipam_release"});
  CHECK(test::read_file(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})");

  b.pf.log.clear();
  REQUIRE(a.unwind(true));
  CHECK(b.pf.log == std::vector<std::string>{"set pf0 vf 2 vlan 0 qos 0"});
  CHECK(test::same_state(b.pf.vfs[{"pf0", 2}], initial_state(2)));
  CHECK_FALSE(read_allocation(b.state(), "0000:03:00.3")->has_value());
}

TEST_CASE("[kernel netdevs, recorded PF] two pods asking for one VF: the second fails, the first is untouched") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  node.add_netns("pod2");
  Att a(b, "ctr1", "net1", "pod1");
  REQUIRE(a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100)", b.ipam("198.51.100.0/24"))));
  auto before = ip_addrs("pod1", "net1");
  auto log_before = b.pf.log;

  Att c(b, "ctr2", "net1", "pod2");
  auto r = c.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":300)", b.ipam("198.51.100.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kConflict);
  CHECK(r.error().msg.find("already allocated to container ctr1") != std::string::npos);
  REQUIRE(c.unwind(false));  // the failed ADD's rollback
  CHECK(b.pf.log == log_before);  // no PF operation for the second pod
  auto l = ip_link("pod1", "net1");
  REQUIRE(l);
  CHECK(l->up);
  CHECK(ip_addrs("pod1", "net1") == before);
  CHECK(b.pf.vfs[{"pf0", 1}].vlan == 100);
  CHECK((*read_allocation(b.state(), "0000:03:00.2"))->container_id == "ctr1");
  REQUIRE(a.unwind(true));
}

TEST_CASE("[kernel netdevs, recorded PF] a stale allocation (pod namespace gone) is reclaimed: the old owner's PF settings are "
          "restored first, and the old owner's later DEL leaves the new owner alone") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  REQUIRE(a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"trust":"on")", b.ipam("198.51.100.0/24"))));
  a.close_ns();
  node.del_netns("pod1");  // the pod vanished without a DEL; its veth stand-in went with it
  // Namespace cleanup is asynchronous: wait (bounded) for the stand-in's peer to go too.
  for (int i = 0; i < 100 && ip_link("", "vfnd1p"); ++i) ::usleep(20000);
  REQUIRE_FALSE(ip_link("", "vfnd1p"));
  veth("vfnd1", "02:aa:00:00:00:01", 1400);  // a real VF netdev returns to the node by itself

  node.add_netns("pod2");
  Att c(b, "ctr2", "net1", "pod2");
  b.pf.log.clear();
  auto r = c.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":300)", b.ipam("198.51.100.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{"set pf0 vf 1 vlan 0 qos 0", "set pf0 vf 1 trust off", "get pf0 vf 1",
                                             "set pf0 vf 1 vlan 300 qos 0"});
  CHECK(ip_link("pod2", "net1"));

  b.pf.log.clear();
  REQUIRE(a.unwind(true));  // ctr1's DEL: namespace gone, VF owned by ctr2 now
  CHECK(b.pf.log.empty());
  CHECK(ip_link("pod2", "net1"));
  CHECK((*read_allocation(b.state(), "0000:03:00.2"))->container_id == "ctr2");

  REQUIRE(c.unwind(true));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK(ip_link("", "vfnd1"));
}

TEST_CASE("[kernel netdevs, recorded PF] ADD failing after the VF moved (IPAM refuses) rolls everything back") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  // The requested address is outside the range: host-local fails after the netdev moved.
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","mac":"02:11:22:33:44:55","mtu":1300,"spoofchk":"off",
      "runtimeConfig":{"ips":["203.0.113.9/24"]})",
                                      b.ipam("198.51.100.0/24")));
  REQUIRE_FALSE(r);
  CHECK_FALSE(ip_link("", "vfnd1"));  // it had moved before IPAM ran
  REQUIRE(ip_link("pod1", "net1"));
  REQUIRE(a.unwind(false));
  auto back = ip_link("", "vfnd1");
  REQUIRE(back);
  CHECK(back->mac == "02:aa:00:00:00:01");
  CHECK(back->mtu == 1400);
  CHECK_FALSE(ip_link("pod1", "net1"));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK_FALSE(read_allocation(b.state(), "0000:03:00.2")->has_value());
}

TEST_CASE("[kernel netdevs, recorded PF] a PF setting the driver refuses fails the ADD clearly and the applied ones are restored") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  b.pf.unsupported = Kind::Trust;
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"spoofchk":"off","trust":"on")", b.ipam("198.51.100.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kKernelFeature);
  CHECK(r.error().msg.find("trust on") != std::string::npos);
  REQUIRE(a.unwind(false));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK(ip_link("", "vfnd1"));
}

TEST_CASE("[kernel netdevs, recorded PF] DEL after the pod namespace is gone succeeds and still restores the PF side") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  REQUIRE(a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100)", b.ipam("198.51.100.0/24"))));
  a.close_ns();
  node.del_netns("pod1");
  REQUIRE(a.unwind(true));
  CHECK_FALSE(a.ctx.pod_ns);  // the DEL really ran without the pod namespace
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK_FALSE(read_allocation(b.state(), "0000:03:00.2")->has_value());
}

TEST_CASE("[kernel netdevs, recorded PF] a link planted at the VF allocation directory is refused by name at ADD and at DEL, "
          "its target untouched") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  const std::string alloc_dir = b.state() + "/sriov", victim = node.dir() + "/victim";
  std::filesystem::create_directories(victim);
  std::filesystem::create_directories(b.state());
  std::filesystem::create_directory_symlink(victim, alloc_dir);
  const std::string conf = sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100)", b.ipam("198.51.100.0/24"));
  {
    Att a(b, "ctr1", "net1", "pod1");
    auto r = a.add("sriov", conf);
    REQUIRE_FALSE(r);
    CHECK(r.error().text().find(alloc_dir) != std::string::npos);
    CHECK(std::filesystem::is_empty(victim));  // no lock, no allocation written through the link
    REQUIRE(a.unwind(false));
    CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  }
  std::filesystem::remove(alloc_dir);
  Att a(b, "ctr2", "net1", "pod1");
  REQUIRE(a.add("sriov", conf));
  // DEL's release: the allocation directory swapped for a link to a copy of it.
  std::filesystem::remove(victim);
  std::filesystem::rename(alloc_dir, victim);
  std::filesystem::create_directory_symlink(victim, alloc_dir);
  auto del = a.unwind(true);
  REQUIRE_FALSE(del);
  CHECK(del.error().text().find(alloc_dir) != std::string::npos);
  CHECK(std::filesystem::exists(victim + "/0000:03:00.2"));  // the VF allocation behind the link is kept
  std::filesystem::remove(alloc_dir);
  std::filesystem::rename(victim, alloc_dir);
  REQUIRE(a.unwind(true));  // once the link is gone the DEL completes
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK_FALSE(read_allocation(b.state(), "0000:03:00.2")->has_value());
}

TEST_CASE("[recorded PF] config: sriov-cni's validation rules, each a clear error naming the key (no kernel change)") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  struct Case {
    const char* body;
    const char* says;
  } cases[] = {
      {R"("vlan":4095)", "vlan 4095"},
      {R"("vlan":10,"vlanQoS":8)", "vlanQoS 8"},
      {R"("vlanQoS":3)", "needs a non-zero vlan"},
      {R"("vlan":10,"vlanProto":"802.1x")", "\"802.1x\" is invalid"},
      {R"("vlanProto":"802.1ad")", "needs a non-zero vlan"},
      {R"("spoofchk":"yes")", "spoofchk \"yes\""},
      {R"("trust":true)", "trust"},
      {R"("link_state":"up")", "link_state \"up\""},
      {R"("min_tx_rate":-1)", "min_tx_rate -1"},
      {R"("min_tx_rate":100,"max_tx_rate":10)", "below min_tx_rate"},
      {R"("mac":"02:11")", "mac \"02:11\""},
      {R"("deviceID":"0000:03:00.9")", "0000:03:00.9"},
  };
  for (auto& c : cases) {
    Att a(b, "ctr1", "net1", "pod1");
    std::string body = std::string(c.body).find("deviceID") == std::string::npos
                           ? std::string(R"("deviceID":"0000:03:00.2",)") + c.body
                           : std::string(c.body);
    auto r = a.add("sriov", sriov_conf(body, b.ipam("198.51.100.0/24")));
    INFO(c.body);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg.find(c.says) != std::string::npos);
    CHECK(b.pf.log.empty());
    CHECK(a.rec.undo.Empty());
  }
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", R"({"cniVersion":"1.1.0","name":"sriov-net","type":"sriov"})");
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(r.error().msg.find("network net-net1 (type sriov) has no device") != std::string::npos);
  CHECK(r.error().msg.find("k8s.v1.cni.cncf.io/resourceName") != std::string::npos);
}

TEST_CASE("[kernel netdevs, fake sysfs] a VF without a reachable PF (no physfn, as in a VM): attached like host-device "
          "(netdev moved, MAC and MTU on the netdev), no PF message; DEL restores it") {
  Node node;
  Bench b(node);
  b.sys.add_pf("0000:06:00.1", "vmvf0", 0, "iavf");  // a PCI device with a netdev and no physfn link
  veth("vmvf0", "02:66:00:00:00:01", 1500);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  a.with_device_info("intel.com/sriov_vm", "0000:06:00.1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:06:00.1","mac":"02:66:00:00:00:99","mtu":1400)",
                                      b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  CHECK(b.pf.log.empty());
  CHECK_FALSE(ip_link("", "vmvf0"));
  auto l = ip_link("pod1", "net1");
  REQUIRE(l);
  CHECK(l->mac == "02:66:00:00:00:99");
  CHECK(l->mtu == 1400);
  CHECK(test::read_file(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:06:00.1"}})");
  CHECK((*read_allocation(b.state(), "0000:06:00.1"))->pf.empty());
  REQUIRE(a.unwind(true));
  auto back = ip_link("", "vmvf0");
  REQUIRE(back);
  CHECK(back->mac == "02:66:00:00:00:01");
  CHECK(back->mtu == 1500);
  CHECK(b.pf.log.empty());
}

TEST_CASE("[kernel netdevs, fake sysfs] a VF without a reachable PF: each PF-side setting asked for is refused by name, "
          "nothing changes") {
  Node node;
  Bench b(node);
  b.sys.add_pf("0000:06:00.1", "vmvf0", 0, "iavf");
  b.sys.add_pf("0000:06:00.2", "", 0, "vfio-pci");
  veth("vmvf0", "02:66:00:00:00:01", 1500);
  node.add_netns("pod1");
  for (auto [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"("deviceID":"0000:06:00.1","vlan":100,"spoofchk":"on")", "net-net1.vlan, net-net1.spoofchk: VF 0000:06:00.1 has no reachable PF"},
           {R"("deviceID":"0000:06:00.1","trust":"on","link_state":"enable","min_tx_rate":1,"max_tx_rate":2)",
            "net-net1.trust, net-net1.link_state, net-net1.min_tx_rate, net-net1.max_tx_rate: VF"},
           {R"("deviceID":"0000:06:00.2","mac":"02:00:00:00:00:01")", "net-net1.mac: VF 0000:06:00.2 has no reachable PF"}}) {
    CAPTURE(body);
    Att a(b, "ctr1", "net1", "pod1");
    auto r = a.add("sriov", sriov_conf(body, b.ipam("198.51.100.0/24")));
    REQUIRE_FALSE(r);
    CHECK(r.error().cni_code == cni_code::kInvalidConfig);
    CHECK_MESSAGE(r.error().msg.find(says) != std::string::npos, r.error().msg);
    CHECK(a.rec.undo.Empty());
  }
  CHECK(ip_link("", "vmvf0"));
  CHECK(b.pf.log.empty());
}


TEST_CASE("[kernel netdevs] once the VF netdev is up with its addresses, a gratuitous ARP and an unsolicited neighbour "
          "advertisement for them reach the link (a listener on the veth peer sees both)") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  REQUIRE(sh("ip link set vfnd1p up").exit_code == 0);
  node.add_netns("pod1");
  Listener peer("vfnd1p");
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2")",
                                      R"({"type":"host-local","dataDir":")" + node.dir() +
                                          R"(/ipam","ranges":[[{"subnet":"198.51.100.0/24"}],[{"subnet":"2001:db8:14::/64"}]]})"));
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 2);
  const IpAddr v4 = r->ips[0].address.addr.is_v4() ? r->ips[0].address.addr : r->ips[1].address.addr;
  const IpAddr v6 = r->ips[0].address.addr.is_v4() ? r->ips[1].address.addr : r->ips[0].address.addr;
  const auto mac = *Mac::parse("02:aa:00:00:00:01");
  bool garp = false, na = false;
  for (auto& f : peer.frames(std::chrono::milliseconds(1500))) {
    garp |= is_garp(f, mac.bytes, v4.bytes);
    na |= is_unsolicited_na(f, mac.bytes, v6.bytes);
  }
  CHECK_MESSAGE(garp, "no gratuitous ARP for " << v4.str());
  CHECK_MESSAGE(na, "no unsolicited NA for " << v6.str());
  REQUIRE(a.unwind(true));
}

TEST_CASE(
    "[kernel netdevs, recorded PF] the PF-side MAC saved before the ADD is restored only when it was "
    "administrative: the VF netdev's own MAC (igb reports it once the VF set it) comes back as 00:00:00:00:00:00, "
    "another one as itself with the VF rebound so it takes it") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  const std::string conf =
      sriov_conf(R"("deviceID":"0000:03:00.2","mac":"02:11:22:33:44:55")", b.ipam("198.51.100.0/24"));
  b.pf.vfs[{"pf0", 1}].mac = *Mac::parse("02:aa:00:00:00:01");  // vfnd1's own MAC
  {
    Att a(b, "ctr1", "net1", "pod1");
    REQUIRE(a.add("sriov", conf));
    b.pf.log.clear();
    REQUIRE(a.unwind(true));
    CHECK(b.pf.log == std::vector<std::string>{"set pf0 vf 1 mac 00:00:00:00:00:00"});
    CHECK(ip_link("", "vfnd1")->mac == "02:aa:00:00:00:01");
    CHECK(b.sys.driver_file("iavf", "bind").empty());
  }
  b.pf.vfs[{"pf0", 1}].mac = *Mac::parse("02:bb:00:00:00:07");  // set by an operator, not the VF's own
  Att a(b, "ctr2", "net1", "pod1");
  REQUIRE(a.add("sriov", conf));
  b.pf.log.clear();
  REQUIRE(a.unwind(true));
  CHECK(b.pf.log == std::vector<std::string>{"set pf0 vf 1 mac 02:bb:00:00:00:07"});
  CHECK(b.sys.driver_file("iavf", "unbind") == "0000:03:00.2");
  CHECK(b.sys.driver_file("iavf", "bind") == "0000:03:00.2");
}
