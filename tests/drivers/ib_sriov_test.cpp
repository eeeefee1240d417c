// The ib-sriov driver (drivers/ib_sriov.cpp) called in-process, each case in a fresh private node:
// the IPoIB VF netdev is a real veth end in the node namespace ([kernel netdevs]); GUIDs and link
// state go through a recording PfOps ([recorded PF]), RDMA moves through a recording fake
// ([fake RDMA]) because this kernel has neither SR-IOV nor RDMA; the sysfs tree (with the driver's
// bind/unbind files) is a fake one per case (tests/support/vf_harness.hpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernel/rdma.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::vf;
using plumb::drivers::vf_attach::read_allocation;

TEST_CASE("[kernel netdevs, recorded PF, fake RDMA] IB VF with a GUID: previous GUID saved, node and port GUID in separate "
          "messages, VF rebound, RDMA device moved before the netdev; DEL reverses all of it") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "ib1", "pod1");
  a.with_device_info("mellanox.com/mlnx_ib", "0000:81:00.2");
  auto pod_ino = a.ns->inode();
  auto node_ino = netns::Netns::current()->inode();
  auto r = a.add("ib-sriov", ib_conf(R"("rdmaIsolation":true,"link_state":"enable",
      "runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"},"args":{"cni":{"guid":"02:00:00:00:00:00:00:bb"}})",
                                     b.ipam("192.0.2.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(b.pf.log == std::vector<std::string>{"get ibp0 vf 0", "set ibp0 vf 0 node_guid 02:00:00:00:00:00:00:aa",
                                             "set ibp0 vf 0 port_guid 02:00:00:00:00:00:00:aa", "set ibp0 vf 0 state enable"});
  CHECK(b.sys.driver_file("mlx5_core", "unbind") == "0000:81:00.2");
  CHECK(b.sys.driver_file("mlx5_core", "bind") == "0000:81:00.2");
  REQUIRE(b.rdma.moves.size() == 1);
  CHECK(b.rdma.moves[0].dev == "mlx5_2");
  CHECK(b.rdma.moves[0].from_ino == node_ino);
  CHECK(b.rdma.moves[0].to_ino == pod_ino);
  // RDMA return registered before the netdev return: on DEL the netdev comes back first.
  CHECK(a.undo_ops() == std::vector<std::string>{"devinfo_remove", "ib-sriov.release", "ib-sriov.restore_vf", "ib-sriov.rdma_return",
                                                 "ib-sriov.return_netdev", "ipam_release"});
  CHECK(ip_link("pod1", "ib1"));
  CHECK_FALSE(ip_link("", "ibvf0"));
  CHECK(test::read_file(a.plan.file) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:81:00.0"}})");

  b.pf.log.clear();
  std::ofstream(b.sys.root() + "/bus/pci/drivers/mlx5_core/bind", std::ios::trunc).close();
  REQUIRE(a.unwind(true));
  CHECK(b.pf.log == std::vector<std::string>{"set ibp0 vf 0 node_guid 00:00:00:00:00:00:01:01",
                                             "set ibp0 vf 0 port_guid 00:00:00:00:00:00:01:02", "set ibp0 vf 0 state auto"});
  CHECK(b.sys.driver_file("mlx5_core", "bind") == "0000:81:00.2");  // rebound after the restore
  REQUIRE(b.rdma.moves.size() == 2);
  CHECK(b.rdma.moves[1].from_ino == pod_ino);
  CHECK(b.rdma.moves[1].to_ino == node_ino);
  CHECK(test::same_state(b.pf.vfs[{"ibp0", 0}], [] {
    VfState s = initial_state(0);
    s.node_guid = 0x101;
    s.port_guid = 0x102;
    return s;
  }()));
  auto back = ip_link("", "ibvf0");
  REQUIRE(back);
  CHECK(back->mtu == 2044);
  CHECK_FALSE(std::filesystem::exists(a.plan.file));
}

TEST_CASE("[fake RDMA / kernel] IB rdmaIsolation: a shared RDMA netns mode and a kernel without RDMA netlink are clear errors") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  b.rdma.mode = rdma::NetnsMode::Shared;
  Att a(b, "ctr1", "ib1", "pod1");
  auto r = a.add("ib-sriov", ib_conf(R"("rdmaIsolation":true)", b.ipam("192.0.2.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kKernelFeature);
  CHECK(r.error().msg.find("exclusive") != std::string::npos);
  CHECK(a.rec.undo.Empty());

  rdma::NetlinkOps real;  // [kernel] this kernel: socket(NETLINK_RDMA) is EPROTONOSUPPORT
  drivers::vf_attach::Backends rb{&b.pf, &real, nullptr};
  drivers::vf_attach::BackendsOverride uses_real_rdma(rb);
  auto r2 = a.add("ib-sriov", ib_conf(R"("rdmaIsolation":true)", b.ipam("192.0.2.0/24")));
  REQUIRE_FALSE(r2);
  CHECK(r2.error().cni_code == cni_code::kKernelFeature);
  CHECK(r2.error().msg.find("no RDMA netlink") != std::string::npos);
  CHECK(ip_link("", "ibvf0"));
}

TEST_CASE("[kernel netdevs, recorded PF] IB GUID checks: bad or all-zero GUID, ib-kubernetes status, and a PF that does not "
          "report GUIDs with a non-IPoIB netdev (the 20-byte address check) are clear errors, rolled back") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  for (auto [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"("runtimeConfig":{"infinibandGUID":"00:00:00:00:00:00:00:00"})", "all zero"},
           {R"("args":{"cni":{"guid":"02:00:00:00:00:00:aa"}})", "not an 8-byte GUID"},
           {R"("ibKubernetesEnabled":true,"runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", "mellanox.infiniband.app"},
           {R"("ibKubernetesEnabled":true,"args":{"cni":{"mellanox.infiniband.app":"configured"}})", "no GUID"},
           {R"("vfioPciMode":true)", "not vfio-pci"}}) {
    Att a(b, "ctr1", "ib1", "pod1");
    auto r = a.add("ib-sriov", ib_conf(body, b.ipam("192.0.2.0/24")));
    INFO(body);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg.find(says) != std::string::npos);
  }
  b.pf.vfs[{"ibp0", 0}].port_guid.reset();
  b.pf.vfs[{"ibp0", 0}].node_guid.reset();
  Att a(b, "ctr1", "ib1", "pod1");
  auto r = a.add("ib-sriov", ib_conf(R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", b.ipam("192.0.2.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("6-byte hardware address, not a 20-byte IPoIB address") != std::string::npos);
  REQUIRE(a.unwind(false));
  CHECK_FALSE(read_allocation(b.state(), "0000:81:00.2")->has_value());
  CHECK(b.pf.log == std::vector<std::string>{"get ibp0 vf 0"});
}

TEST_CASE("[recorded PF] ib-sriov pkey: a string is accepted and kept in the config as ib-sriov-cni keeps it (for "
          "ib-kubernetes), anything else is an error naming the key") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  {
    Att a(b, "ctr1", "ib1", "pod1");
    auto r = a.add("ib-sriov", ib_conf(R"("pkey":"0x5")", b.ipam("192.0.2.0/24")));
    REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
    CHECK(b.pf.log.empty());  // the plugin programs nothing for a pkey: ib-kubernetes does
    REQUIRE(a.unwind(true));
  }
  Att a(b, "ctr1", "ib1", "pod1");
  auto r = a.add("ib-sriov", ib_conf(R"("pkey":5)", b.ipam("192.0.2.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(r.error().msg.find("pkey") != std::string::npos);
}

TEST_CASE("[recorded PF, fake sysfs] ib-sriov PF passthrough (ib-sriov-cni): a PF bound to vfio-pci is claimed and reported "
          "with no VF settings (vfioPciMode auto-detected from the driver); a PF on a kernel driver is refused") {
  Node node;
  Bench b(node);
  b.sys.add_pf("0000:82:00.0", "", 0, "vfio-pci");
  b.sys.add_pf("0000:83:00.0", "ibp3", 0, "mlx5_core");
  node.add_netns("pod1");
  {
    Att a(b, "ctr1", "ib1", "pod1");
    a.with_device_info("mellanox.com/ib_pf", "0000:82:00.0");
    auto r = a.add("ib-sriov", R"({"cniVersion":"1.1.0","name":"ib-net","type":"ib-sriov","deviceID":"0000:82:00.0",
                                   "runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"}})");
    REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
    CHECK(b.pf.log.empty());
    REQUIRE(r->interfaces.size() == 1);
    CHECK(r->interfaces[0].pci_id == "0000:82:00.0");
    CHECK((*read_allocation(b.state(), "0000:82:00.0"))->mode == "userspace");
    CHECK(test::read_file(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:82:00.0"}})");
    REQUIRE(a.unwind(true));
    CHECK_FALSE(read_allocation(b.state(), "0000:82:00.0")->has_value());
  }
  Att a(b, "ctr1", "ib1", "pod1");
  auto r = a.add("ib-sriov", R"({"cniVersion":"1.1.0","name":"ib-net","type":"ib-sriov","deviceID":"0000:83:00.0"})");
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(r.error().msg.find("0000:83:00.0 is a PF (no physfn link)") != std::string::npos);
  CHECK(a.rec.undo.Empty());
}
