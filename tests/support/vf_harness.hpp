// The in-process bench of the VF driver tests (tests/drivers/{sriov,ib_sriov,vdpa,vf_attach}_test.cpp):
// a node with a fake sysfs tree and recording backends (tests/support/sriov_fakes.hpp: [recorded PF],
// [fake RDMA], [fake vdpa]); attachments run as the orchestrator runs them (parse + add with their
// own record and journal, DEL by unwinding the journal); the VF netdevs are real veth ends in the
// private node namespace ([kernel netdevs]), read back independently with `ip -j`; and the
// standard trees of each kind.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drivers/undo.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/base/netns.hpp"
#include "engine/state/journal.hpp"
#include "engine/state/state.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/sriov_fakes.hpp"

namespace plumb::test {

/// What `ip -j link show` says about one interface; nullopt when it does not exist.
struct IpLink {
  std::string mac;
  unsigned mtu = 0;
  bool up = false;
};
inline std::optional<IpLink> ip_link(const std::string& ns, const std::string& name) {
  auto p = sh("ip -j " + (ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + name + " 2>/dev/null");
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
inline std::vector<std::string> ip_addrs(const std::string& ns, const std::string& name) {
  auto d = ip_json("-n " + ns + " addr show dev " + name);
  std::vector<std::string> out;
  for (auto& a : d[0]["addr_info"].GetArray()) {
    if (std::string(a["scope"].GetString()) == "global") {
      out.push_back(std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt()));
    }
  }
  return out;
}

inline void veth(const std::string& name, const std::string& mac, unsigned mtu) {
  auto r = sh("ip link add " + name + " address " + mac + " mtu " + std::to_string(mtu) + " type veth peer name " +
              name + "p");
  REQUIRE(r.exit_code == 0);
}

/// The node of one case: fake sysfs, fakes, state/IPAM/device-info directories.
struct Bench {
  Node& node;
  FakeSysfs sys;
  RecordingPfOps pf;
  FakeRdma rdma;
  FakeVdpa vdpa;
  drivers::vf_attach::Backends b{&pf, &rdma, &vdpa};
  drivers::vf_attach::BackendsOverride uses_fakes{b};  ///< every driver and undo operation of the case
  netlink::Socket nl;
  explicit Bench(Node& n) : node(n), sys(n.dir() + "/sys"), nl(std::move(*netlink::Socket::open())) {}
  std::string state() const { return node.dir() + "/state"; }
  std::string devinfo_base() const { return node.dir() + "/devinfo"; }
  std::string ipam(const std::string& subnet, const std::string& extra = "") const {
    return R"({"type":"host-local","dataDir":")" + node.dir() + R"(/ipam","ranges":[[{"subnet":")" + subnet +
           R"("}]])" + extra + "}";
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
  /// orchestrator does, with the bench's recording backends.
  Result<cni::CniResult> add(const std::string& type, const std::string& conf_json) {
    auto conf = json::parse(conf_json, "test conf");
    REQUIRE(conf);
    REQUIRE(std::string((*conf)["type"].GetString()) == type);
    return add_plugin(ctx, *conf, nullptr);
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

/// The state the recording PF starts each VF in: zero MAC, spoofchk on, trust off, link state auto.
inline vf::VfState initial_state(uint32_t index) {
  vf::VfState s;
  s.vf = index;
  s.mac = *Mac::parse("00:00:00:00:00:00");
  s.spoofchk = true;
  s.trust = false;
  s.link_state = vf::LinkState::Auto;
  return s;
}

inline std::string sriov_conf(const std::string& body, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"sriov-net","type":"sriov",)" + body + R"(,"ipam":)" + ipam + "}";
}

/// The standard tree: PF 0000:03:00.0 (pf0) with VF1 0000:03:00.2 (iavf, netdev vfnd1) and VF2
/// 0000:03:00.3 (vfio-pci); the VF netdev stand-in vfnd1 is a veth with MAC 02:aa:00:00:00:01, MTU 1400.
inline void sriov_tree(Bench& b) {
  b.sys.add_pf("0000:03:00.0", "pf0", 4, "ice");
  b.sys.add_vf("0000:03:00.0", 1, "0000:03:00.2", "iavf", "vfnd1");
  b.sys.add_vf("0000:03:00.0", 2, "0000:03:00.3", "vfio-pci");
  b.pf.vfs[{"pf0", 1}] = initial_state(1);
  b.pf.vfs[{"pf0", 2}] = initial_state(2);
  veth("vfnd1", "02:aa:00:00:00:01", 1400);
}

/// PF 0000:81:00.0 (ibp0) with VF 0000:81:00.2 (mlx5_core, netdev ibvf0, RDMA mlx5_2).
inline void ib_tree(Bench& b) {
  b.sys.add_pf("0000:81:00.0", "ibp0", 2, "mlx5_core");
  b.sys.add_vf("0000:81:00.0", 0, "0000:81:00.2", "mlx5_core", "ibvf0", "mlx5_2");
  vf::VfState s = initial_state(0);
  s.node_guid = 0x0000000000000101ull;
  s.port_guid = 0x0000000000000102ull;
  b.pf.vfs[{"ibp0", 0}] = s;
  veth("ibvf0", "02:bb:00:00:00:01", 2044);
}

inline std::string ib_conf(const std::string& body, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"ib-net","type":"ib-sriov","deviceID":"0000:81:00.2",)" + body +
         R"(,"ipam":)" + ipam + "}";
}

/// PF 0000:65:00.0 with VF 0000:65:00.2 (vdpa0 on vhost_vdpa) and VF 0000:65:00.3 (vdpa1 on
/// virtio_vdpa, netdev vdnet1 = a veth with MAC 02:cc:00:00:00:01, MTU 1500).
inline void vdpa_tree(Bench& b) {
  b.sys.add_pf("0000:65:00.0", "p0", 2, "mlx5_core");
  b.sys.add_vf("0000:65:00.0", 0, "0000:65:00.2", "mlx5_core");
  b.sys.add_vf("0000:65:00.0", 1, "0000:65:00.3", "mlx5_core");
  b.sys.add_vdpa("vdpa0", "0000:65:00.2", "vhost_vdpa", 0);
  b.sys.add_vdpa("vdpa1", "0000:65:00.3", "virtio_vdpa", 1, "vdnet1");
  b.vdpa.devices = {{"vdpa0", "pci", "0000:65:00.2"}, {"vdpa1", "pci", "0000:65:00.3"}};
  veth("vdnet1", "02:cc:00:00:00:01", 1500);
}

inline std::string vdpa_conf(const std::string& id, const std::string& ipam) {
  return R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa","deviceID":")" + id + R"(","ipam":)" + ipam + "}";
}

}  // namespace plumb::test
