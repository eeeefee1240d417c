// The rdma driver (drivers/rdma.cpp, rdma-cni's chained plugin) in-process after the sriov driver,
// each case in a fresh private node: the VF netdevs are veth ends ([kernel netdevs]), the PF side
// a recording PfOps ([recorded PF]) and the RDMA subsystem a recording backend ([fake RDMA]: this
// kernel has no RDMA netlink; engine/kernel/rdma's messages are golden-byte tested and the
// QEMU full-kernel tier checks them against rdma_rxe). What is asserted: which RDMA device moves,
// from which namespace into which (namespace inodes), in which order DEL returns it, and the
// errors (not chained, shared netns mode, no RDMA device, no way to find the device).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "drivers/steps.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;

namespace {

/// PF 0000:05:00.0 (p5) with VF 0000:05:00.2 (netdev vfr1, RDMA device mlx5_5) and VF 0000:05:00.3
/// (netdev vfr2, no RDMA device); the recording PF knows both.
void rdma_tree(Bench& b) {
  b.sys.add_pf("0000:05:00.0", "p5", 2, "mlx5_core");
  b.sys.add_vf("0000:05:00.0", 0, "0000:05:00.2", "mlx5_core", "vfr1", "mlx5_5");
  b.sys.add_vf("0000:05:00.0", 1, "0000:05:00.3", "mlx5_core", "vfr2");
  b.pf.vfs[{"p5", 0}] = initial_state(0);
  b.pf.vfs[{"p5", 1}] = initial_state(1);
  veth("vfr1", "02:ab:00:00:00:01", 1500);
  veth("vfr2", "02:ab:00:00:00:02", 1500);
}

unsigned long ino_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

std::string rdma_conf(const std::string& body) {
  return R"({"cniVersion":"1.1.0","name":"sriov-net","type":"rdma")" + (body.empty() ? "" : "," + body) + "}";
}

}  // namespace

TEST_CASE(
    "[kernel netdevs, recorded PF, fake RDMA] rdma with a RecordingExecutor: one step, the RDMA device's move, "
    "recorded with its return and not applied") {
  Node node;
  Bench b(node);
  rdma_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:05:00.2")", b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  drivers::steps::RecordingExecutor rec;
  a.ctx.executor = &rec;
  auto conf = json::parse(rdma_conf(R"("deviceID":"0000:05:00.2")"), "test");
  REQUIRE(conf);
  auto r2 = add_plugin(a.ctx, *conf, &*r);
  REQUIRE_MESSAGE(r2, (r2 ? "" : r2.error().text()));
  REQUIRE(rec.made().size() == 1);
  CHECK(rec.made()[0].step == "move_rdma_into_pod");
  REQUIRE(rec.made()[0].inverse);
  CHECK(json::dump(drivers::undo::encode(rec.made()[0].inverse->op)) ==
        R"({"op":"rdma.rdma_return","pci":"0000:05:00.2","container_id":"ctr1","ifname":"net1","device":"mlx5_5"})");
  CHECK(b.rdma.moves.empty());
  CHECK(a.undo_ops().back() != "rdma.rdma_return");
}

TEST_CASE("[kernel netdevs, recorded PF, fake RDMA] rdma chained after sriov: the VF's RDMA device moves into the pod; the "
          "result is prevResult; DEL returns it before the netdev") {
  Node node;
  Bench b(node);
  rdma_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:05:00.2")", b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  auto conf = json::parse(rdma_conf(R"("deviceID":"0000:05:00.2","args":{"cni":{"debug":true}})"), "test");
  REQUIRE(conf);
  auto r2 = add_plugin(a.ctx, *conf, &*r);
  REQUIRE_MESSAGE(r2, (r2 ? "" : r2.error().text()));
  CHECK(cni::encode_result(*r2, "1.1.0").value() == cni::encode_result(*r, "1.1.0").value());
  const unsigned long node_ino = ino_of("/proc/self/ns/net"), pod_ino = ino_of("/run/netns/pod1");
  REQUIRE(b.rdma.moves.size() == 1);
  CHECK(b.rdma.moves[0].dev == "mlx5_5");
  CHECK(b.rdma.moves[0].from_ino == node_ino);
  CHECK(b.rdma.moves[0].to_ino == pod_ino);
  CHECK(a.undo_ops().back() == "rdma.rdma_return");

  REQUIRE(a.unwind(true));
  REQUIRE(b.rdma.moves.size() == 2);
  CHECK(b.rdma.moves[1].dev == "mlx5_5");
  CHECK(b.rdma.moves[1].from_ino == pod_ino);
  CHECK(b.rdma.moves[1].to_ino == node_ino);
  CHECK(ip_link("", "vfr1"));  // and the netdev after it
}

TEST_CASE("[kernel netdevs, recorded PF, fake RDMA] rdma without deviceID: prevResult's pciID, else the VF whose "
          "administrative MAC is the interface's (rdma-cni); none or two such VFs is an error") {
  Node node;
  Bench b(node);
  rdma_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:05:00.2","mac":"02:00:00:00:05:02")", b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  auto conf = json::parse(rdma_conf(""), "test");
  REQUIRE(conf);
  SUBCASE("pciID") {
    REQUIRE(r->interfaces.at(0).pci_id == "0000:05:00.2");
    REQUIRE(add_plugin(a.ctx, *conf, &*r));
    REQUIRE(b.rdma.moves.size() == 1);
    CHECK(b.rdma.moves[0].dev == "mlx5_5");
  }
  SUBCASE("administrative MAC") {
    cni::CniResult prev = *r;
    prev.interfaces[0].pci_id.clear();  // a result from a plugin older than CNI 1.1.0
    REQUIRE(add_plugin(a.ctx, *conf, &prev));
    REQUIRE(b.rdma.moves.size() == 1);
    CHECK(b.rdma.moves[0].dev == "mlx5_5");
    b.pf.vfs[{"p5", 1}].mac = *Mac::parse("02:00:00:00:05:02");  // now two VFs have that MAC
    auto two = add_plugin(a.ctx, *conf, &prev);
    REQUIRE_FALSE(two);
    CHECK(two.error().msg.find("2 VFs have administrative MAC 02:00:00:00:05:02") != std::string::npos);
  }
  REQUIRE(a.unwind(true));
}

TEST_CASE("[kernel netdevs, recorded PF, fake RDMA] rdma errors: not chained, shared RDMA netns mode, a device without an "
          "RDMA device; nothing moved") {
  Node node;
  Bench b(node);
  rdma_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  SUBCASE("not chained") {
    auto r = a.add("rdma", rdma_conf(R"("deviceID":"0000:05:00.2")"));
    REQUIRE_FALSE(r);
    CHECK(r.error().cni_code == cni_code::kInvalidConfig);
    CHECK(r.error().msg.find("chained plugin") != std::string::npos);
  }
  SUBCASE("shared mode / no RDMA device") {
    auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:05:00.3")", b.ipam("198.51.100.0/24")));
    REQUIRE(r);
    b.rdma.mode = rdma::NetnsMode::Shared;
    auto conf = json::parse(rdma_conf(""), "test");
    auto shared = add_plugin(a.ctx, *conf, &*r);
    REQUIRE_FALSE(shared);
    CHECK(shared.error().cni_code == cni_code::kKernelFeature);
    CHECK(shared.error().msg.find("the rdma plugin needs the RDMA subsystem in exclusive netns mode") != std::string::npos);
    b.rdma.mode = rdma::NetnsMode::Exclusive;
    auto none = add_plugin(a.ctx, *conf, &*r);
    REQUIRE_FALSE(none);
    CHECK(none.error().msg.find("device 0000:05:00.3 has 0 RDMA devices") != std::string::npos);
    REQUIRE(a.unwind(false));
  }
  CHECK(b.rdma.moves.empty());
  auto ops = a.undo_ops();
  CHECK(std::find(ops.begin(), ops.end(), "rdma.rdma_return") == ops.end());
}

TEST_CASE("[fake RDMA, fake sysfs] rdma with an auxiliary device (a mlx5 sub-function) as deviceID moves its RDMA device") {
  Node node;
  Bench b(node);
  std::filesystem::create_directories(b.sys.root() + "/bus/auxiliary/devices/mlx5_core.sf.4/infiniband/mlx5_9");
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  cni::CniResult prev;
  prev.interfaces.push_back({"net1", "02:00:00:00:00:09", std::nullopt, "/run/netns/pod1", "", ""});
  auto conf = json::parse(rdma_conf(R"("deviceID":"mlx5_core.sf.4")"), "test");
  auto r = add_plugin(a.ctx, *conf, &prev);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().text()));
  REQUIRE(b.rdma.moves.size() == 1);
  CHECK(b.rdma.moves[0].dev == "mlx5_9");
  REQUIRE(a.unwind(true));
  CHECK(b.rdma.moves.size() == 2);
  auto bad = json::parse(rdma_conf(R"("deviceID":"../x")"), "test");
  auto e = add_plugin(a.ctx, *bad, &prev);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg.find("deviceID \"../x\" is neither a PCI address nor an auxiliary device name") != std::string::npos);
}
