// The sriov, ib-sriov and vdpa drivers called in-process, each case in a fresh private node:
// the VF netdevs are real veth ends in the node namespace, so moves, renames, MAC/MTU restores and
// rollbacks run against the real kernel ([kernel netdevs]); the PF side goes through a recording
// PfOps, RDMA moves through a recording fake and the vDPA listing is a fake ([recorded PF],
// [fake RDMA], [fake vdpa]) because this kernel has no SR-IOV, RDMA or vdpa; the sysfs tree is a
// fake one per case. Kernel state is read back independently with `ip -j`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "drivers/sriov_vf.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "cni-entry/npwg/nad.hpp"
#include "engine/kernel/netns.hpp"
#include "engine/state/state.hpp"
#include "engine/state/journal.hpp"
#include "tests/support/sriov_fakes.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::drivers::sriov;
using plumb::test::Node;
using Kind = VfSetting::Kind;

namespace {

/// What `ip -j link show` says about one interface; nullopt when it does not exist.
struct IpLink {
  std::string mac;
  unsigned mtu = 0;
  bool up = false;
};
std::optional<IpLink> ip_link(const std::string& ns, const std::string& name) {
  auto p = test::sh("ip -j " + (ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + name + " 2>/dev/null");
  if (p.exit_code != 0) return std::nullopt;
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  if (d.HasParseError() || !d.IsArray() || d.Empty()) return std::nullopt;
  IpLink l;
  l.mac = d[0]["address"].GetString();
  l.mtu = d[0]["mtu"].GetUint();
  for (auto& f : d[0]["flags"].GetArray()) l.up |= std::string(f.GetString()) == "UP";
  return l;
}
std::vector<std::string> ip_addrs(const std::string& ns, const std::string& name) {
  auto d = test::ip_json("-n " + ns + " addr show dev " + name);
  std::vector<std::string> out;
  for (auto& a : d[0]["addr_info"].GetArray()) {
    if (std::string(a["scope"].GetString()) == "global") {
      out.push_back(std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt()));
    }
  }
  return out;
}

void veth(const std::string& name, const std::string& mac, unsigned mtu) {
  auto r = test::sh("ip link add " + name + " address " + mac + " mtu " + std::to_string(mtu) + " type veth peer name " + name + "p");
  REQUIRE(r.exit_code == 0);
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The node of one case: fake sysfs, fakes, state/IPAM/device-info directories.
struct Bench {
  Node& node;
  test::FakeSysfs sys;
  test::RecordingPfOps pf;
  test::FakeRdma rdma;
  test::FakeVdpa vdpa;
  Backends b{&pf, &rdma, &vdpa};
  netlink::Socket nl;
  explicit Bench(Node& n) : node(n), sys(n.dir() + "/sys"), nl(std::move(*netlink::Socket::open())) {}
  std::string state() const { return node.dir() + "/state"; }
  std::string devinfo_base() const { return node.dir() + "/devinfo"; }
  std::string ipam(const std::string& subnet, const std::string& extra = "") const {
    return R"({"type":"host-local","dataDir":")" + node.dir() + R"(/ipam","ranges":[[{"subnet":")" + subnet + R"("}]])" + extra + "}";
  }
};

/// One attachment run in-process as the orchestrator runs it: its own record and journal.
struct Att {
  Bench& bench;
  std::string cid, ifname, pod;
  std::optional<netns::Netns> ns;
  std::optional<netlink::Socket> podnl;
  state::StateDir sd;
  state::AttachmentRecord rec;
  std::unique_ptr<txn::Journal> journal;
  drivers::Context ctx;
  devinfo::Plan plan;

  Att(Bench& b, std::string container, std::string ifn, std::string pod_name)
      : bench(b), cid(std::move(container)), ifname(std::move(ifn)), pod(std::move(pod_name)), sd(b.state()) {
    rec.container_id = cid;
    rec.ifname = ifname;
    rec.network = "net-" + ifname;
    rec.index = 1;
    journal = std::make_unique<txn::Journal>(sd, rec);
    open();
  }
  void open() {
    ctx = drivers::Context{};
    ctx.container_id = cid;
    ctx.ifname = ifname;
    ctx.network = rec.network;
    ctx.node = &bench.nl;
    ctx.journal = journal.get();
    ctx.sysfs_root = bench.sys.root();
    ctx.state_dir = bench.state();
    ctx.vf_backends = &bench.b;
    ns.reset();
    podnl.reset();
    auto n = netns::Netns::open("/run/netns/" + pod);
    if (n) {
      ns = std::move(*n);
      podnl = std::move(*netlink::Socket::open_in(ns->fd()));
      ctx.netns_path = ns->path();
      ctx.pod_ns = &*ns;
      ctx.pod = &*podnl;
    }
  }
  /// Drops this process's references to the pod namespace (so deleting it really destroys it).
  void close_ns() {
    ctx.pod = nullptr;
    ctx.pod_ns = nullptr;
    podnl.reset();
    ns.reset();
  }
  /// Device-info as the orchestrator prepares it (resourceName + deviceID given).
  void with_device_info(const std::string& resource, const std::string& device_id) {
    plan.resource_name = resource;
    plan.device_id = device_id;
    plan.file = devinfo::cni_file(bench.devinfo_base(), cid, ifname);
    REQUIRE(devinfo::prepare(*journal, bench.devinfo_base(), plan));
    ctx.device_info_file = plan.file;
  }
  /// Parses `conf_json` (a config of driver `type`) and runs the driver's add, as the
  /// orchestrator does, with the recording backends in ctx.vf_backends.
  Result<cni::CniResult> add(const std::string& type, const std::string& conf_json) {
    auto conf = json::parse(conf_json, "test conf");
    REQUIRE(conf);
    REQUIRE(std::string((*conf)["type"].GetString()) == type);
    return test::add_plugin(ctx, *conf, nullptr);
  }
  /// Unwinds the journal (complete: a DEL of a finished attachment; else an ADD rollback).
  Status unwind(bool complete) {
    open();  // as a DEL does: the pod namespace may be gone by now
    return drivers::undo::unwind(ctx, rec.undo, complete, "test record");
  }
  std::vector<std::string> undo_ops() const {
    std::vector<std::string> out;
    for (auto& op : rec.undo.GetArray()) out.push_back(op["op"].GetString());
    return out;
  }
};

VfState initial_state(uint32_t vf) {
  VfState s;
  s.vf = vf;
  s.mac = *Mac::parse("00:00:00:00:00:00");
  s.spoofchk = true;
  s.trust = false;
  s.link_state = LinkState::Auto;
  return s;
}

std::string sriov_conf(const std::string& body, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"sriov-net","type":"sriov",)" + body + R"(,"ipam":)" + ipam + "}";
}

/// The standard tree: PF 0000:03:00.0 (pf0) with VF1 0000:03:00.2 (iavf, netdev vfnd1) and VF2
/// 0000:03:00.3 (vfio-pci); the VF netdev stand-in vfnd1 is a veth with MAC 02:aa:00:00:00:01, MTU 1400.
void sriov_tree(Bench& b) {
  b.sys.add_pf("0000:03:00.0", "pf0", 4, "ice");
  b.sys.add_vf("0000:03:00.0", 1, "0000:03:00.2", "iavf", "vfnd1");
  b.sys.add_vf("0000:03:00.0", 2, "0000:03:00.3", "vfio-pci");
  b.pf.vfs[{"pf0", 1}] = initial_state(1);
  b.pf.vfs[{"pf0", 2}] = initial_state(2);
  veth("vfnd1", "02:aa:00:00:00:01", 1400);
}

}  // namespace

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
  CHECK(slurp(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","pf-pci-address":"0000:03:00.0"}})");
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
  CHECK(slurp(a.plan.file) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})");

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

TEST_CASE("config: sriov-cni's validation rules, each a clear error naming the key (no kernel change)") {
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
  CHECK(r.error().msg.find("pod-resources") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// InfiniBand

namespace {

/// PF 0000:81:00.0 (ibp0) with VF 0000:81:00.2 (mlx5_core, netdev ibvf0, RDMA mlx5_2).
void ib_tree(Bench& b) {
  b.sys.add_pf("0000:81:00.0", "ibp0", 2, "mlx5_core");
  b.sys.add_vf("0000:81:00.0", 0, "0000:81:00.2", "mlx5_core", "ibvf0", "mlx5_2");
  VfState s = initial_state(0);
  s.node_guid = 0x0000000000000101ull;
  s.port_guid = 0x0000000000000102ull;
  b.pf.vfs[{"ibp0", 0}] = s;
  veth("ibvf0", "02:bb:00:00:00:01", 2044);
}

std::string ib_conf(const std::string& body, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"ib-net","type":"ib-sriov","deviceID":"0000:81:00.2",)" + body + R"(,"ipam":)" + ipam + "}";
}

}  // namespace

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
  CHECK(slurp(a.plan.file) ==
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
  Backends rb{&b.pf, &real, nullptr};
  a.ctx.vf_backends = &rb;
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

// ---------------------------------------------------------------------------------------------
// vDPA

namespace {

/// PF 0000:65:00.0 with VF 0000:65:00.2 (vdpa0 on vhost_vdpa) and VF 0000:65:00.3 (vdpa1 on
/// virtio_vdpa, netdev vdnet1 = a veth with MAC 02:cc:00:00:00:01, MTU 1500).
void vdpa_tree(Bench& b) {
  b.sys.add_pf("0000:65:00.0", "p0", 2, "mlx5_core");
  b.sys.add_vf("0000:65:00.0", 0, "0000:65:00.2", "mlx5_core");
  b.sys.add_vf("0000:65:00.0", 1, "0000:65:00.3", "mlx5_core");
  b.sys.add_vdpa("vdpa0", "0000:65:00.2", "vhost_vdpa", 0);
  b.sys.add_vdpa("vdpa1", "0000:65:00.3", "virtio_vdpa", 1, "vdnet1");
  b.vdpa.devices = {{"vdpa0", "pci", "0000:65:00.2"}, {"vdpa1", "pci", "0000:65:00.3"}};
  veth("vdnet1", "02:cc:00:00:00:01", 1500);
}

std::string vdpa_conf(const std::string& id, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa","deviceID":")" + id + R"(","ipam":)" + ipam + "}";
}

}  // namespace

TEST_CASE("[fake vdpa] vhost_vdpa device: found by its VF's PCI address, nothing moves, /dev/vhost-vdpa-N in device-info") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net4", "pod1");
  a.with_device_info("mellanox.com/vdpa", "0000:65:00.2");
  auto r = a.add("vdpa", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(r->interfaces[0].pci_id == "0000:65:00.2");
  CHECK(r->ips.size() == 1);
  CHECK_FALSE(ip_link("pod1", "net4"));
  CHECK(slurp(a.plan.file) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})");
  CHECK((*read_allocation(b.state(), "0000:65:00.2"))->mode == "vhost");
  REQUIRE(a.unwind(true));
  CHECK_FALSE(read_allocation(b.state(), "0000:65:00.2")->has_value());
  CHECK(b.pf.log.empty());
}

TEST_CASE("[kernel netdevs, fake vdpa] virtio_vdpa device: its virtio netdev moves into the pod like a VF and comes back") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net5", "pod1");
  auto r = a.add("vdpa", R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa","deviceID":"0000:65:00.3","mtu":1400,"ipam":)" +
                             b.ipam("203.0.113.0/24") + "}");
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  auto l = ip_link("pod1", "net5");
  REQUIRE(l);
  CHECK(l->mac == "02:cc:00:00:00:01");
  CHECK(l->mtu == 1400);
  CHECK(l->up);
  CHECK_FALSE(ip_link("", "vdnet1"));
  REQUIRE(a.unwind(true));
  auto back = ip_link("", "vdnet1");
  REQUIRE(back);
  CHECK(back->mtu == 1500);
  CHECK_FALSE(ip_link("pod1", "net5"));
}

TEST_CASE("[fake vdpa] a VF without a vDPA device, and an unbound vDPA device, are clear errors") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  b.vdpa.devices = {{"vdpa1", "pci", "0000:65:00.3"}};
  Att a(b, "ctr1", "net4", "pod1");
  auto r = a.add("vdpa", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(r.error().msg.find("no vDPA device has PCI device 0000:65:00.2") != std::string::npos);
  std::filesystem::remove(b.sys.root() + "/bus/pci/devices/0000:65:00.3/vdpa1/driver");
  auto u = a.add("vdpa", vdpa_conf("0000:65:00.3", b.ipam("203.0.113.0/24")));
  REQUIRE_FALSE(u);
  CHECK(u.error().msg.find("bound to no driver") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// A whole pod

TEST_CASE("[kernel netdevs, recorded PF, fake vdpa] pod with default + SR-IOV (kernel VF) + SR-IOV (vfio) + IB (GUID) + vDPA "
          "(vhost): network-status holds exactly the spec's device-info for each; DEL restores every VF setting, name, MAC, "
          "MTU and namespace") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  ib_tree(b);
  vdpa_tree(b);
  node.add_netns("pod1");
  const VfState ib_initial = b.pf.vfs[{"ibp0", 0}];

  // The default network: a bridge attachment, as the orchestrator runs it.
  Att def(b, "ctr1", "eth0", "pod1");
  auto def_conf = json::parse(R"({"cniVersion":"1.1.0","name":"default-net","type":"bridge","bridge":"plumb0","ipam":)" +
                                  b.ipam("2001:db8:5::/64") + "}",
                              "default");
  REQUIRE(def_conf);
  auto def_r = test::add_plugin(def.ctx, *def_conf, nullptr);
  REQUIRE(def_r);

  std::vector<std::unique_ptr<Att>> atts;
  std::vector<cni::CniResult> results;
  struct Spec {
    std::string ifname, type, resource, id, conf;
  };
  std::vector<Spec> specs = {
      {"net1", "sriov", "intel.com/sriov_netdevice", "0000:03:00.2",
       sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"mac":"02:11:22:33:44:55","trust":"on")", b.ipam("198.51.100.0/24"))},
      {"net2", "sriov", "intel.com/sriov_dpdk", "0000:03:00.3",
       sriov_conf(R"("deviceID":"0000:03:00.3","vlan":200,"spoofchk":"off")", b.ipam("198.51.100.0/24"))},
      {"ib1", "ib-sriov", "mellanox.com/mlnx_ib", "0000:81:00.2",
       ib_conf(R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", b.ipam("192.0.2.0/24"))},
      {"net4", "vdpa", "mellanox.com/vdpa", "0000:65:00.2", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24"))},
  };
  // One device plugin file exists (vhost-net only a device plugin knows); the others are written by plumb.
  test::write_file(devinfo::dp_file(b.devinfo_base(), "intel.com/sriov_netdevice", "0000:03:00.2"),
                   R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net"}})");
  for (auto& s : specs) {
    atts.push_back(std::make_unique<Att>(b, "ctr1", s.ifname, "pod1"));
    atts.back()->with_device_info(s.resource, s.id);
    auto r = atts.back()->add(s.type, s.conf);
    INFO(s.ifname, ": ", (r ? std::string() : r.error().text()));
    REQUIRE(r);
    results.push_back(*r);
  }

  // network-status as the orchestrator builds it: status_from_result + the device-info file.
  std::vector<nad::StatusEntry> status;
  status.push_back(nad::status_from_result("default-net", *def_r, "eth0", true));
  for (size_t i = 0; i < atts.size(); ++i) {
    auto e = nad::status_from_result("default/" + specs[i].ifname, results[i], specs[i].ifname, false);
    auto di = devinfo::read(atts[i]->plan.file);
    REQUIRE(di);
    REQUIRE(di->has_value());
    e.device_info = std::move(**di);
    status.push_back(std::move(e));
  }
  REQUIRE(nad::check_network_status(status));
  auto doc = json::parse(nad::encode_network_status(status), "status");
  REQUIRE(doc);
  REQUIRE(doc->Size() == 5);
  CHECK_FALSE((*doc)[0].HasMember("device-info"));
  const char* want[] = {
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:81:00.0"}})",
      R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})",
  };
  for (size_t i = 0; i < 4; ++i) {
    INFO(specs[i].ifname);
    CHECK(json::dump((*doc)[static_cast<rapidjson::SizeType>(i + 1)]["device-info"]) == want[i]);
  }
  CHECK(std::string((*doc)[1]["mac"].GetString()) == "02:11:22:33:44:55");

  // DEL, newest attachment first.
  for (size_t i = atts.size(); i-- > 0;) REQUIRE(atts[i]->unwind(true));
  REQUIRE(def.unwind(true));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 2}], initial_state(2)));
  CHECK(test::same_state(b.pf.vfs[{"ibp0", 0}], ib_initial));
  for (auto [name, mac, mtu] : std::vector<std::tuple<std::string, std::string, unsigned>>{
           {"vfnd1", "02:aa:00:00:00:01", 1400}, {"ibvf0", "02:bb:00:00:00:01", 2044}, {"vdnet1", "02:cc:00:00:00:01", 1500}}) {
    auto l = ip_link("", name);
    INFO(name);
    REQUIRE(l);
    CHECK(l->mac == mac);
    CHECK(l->mtu == mtu);
  }
  auto pod_links = test::ip_json("-n pod1 link show");
  CHECK(pod_links.Size() == 1);  // lo only
  for (auto& s : specs) CHECK_FALSE(read_allocation(b.state(), s.id)->has_value());
  CHECK(test::PodFixture::files_under(b.devinfo_base() + "/cni").empty());
}
