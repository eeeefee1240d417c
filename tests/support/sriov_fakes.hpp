// Test doubles for the SR-IOV / InfiniBand / vDPA tests: a fake sysfs tree (PF with sriov_numvfs,
// virtfnN links; VFs with physfn, driver links, net/<name>, infiniband/<dev>; vDPA devices bound to
// vhost_vdpa or virtio_vdpa), a recording PfOps that keeps per-VF state so a test can assert the
// sequence of PF operations and that DEL put every setting back, a fake RDMA backend, and a fake
// vDPA listing. None of them touches the kernel; the netdevs the fake tree names are real veth ends
// created by the tests in their private node namespace.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernel/vf.hpp"
#include "engine/kernel/rdma.hpp"
#include "engine/kernel/vdpa.hpp"

namespace plumb::test {

/// A sysfs tree under `root` shaped like /sys for PCI SR-IOV devices and vDPA devices.
class FakeSysfs {
 public:
  explicit FakeSysfs(std::string root) : root_(std::move(root)) { std::filesystem::create_directories(root_ + "/bus/pci/devices"); }
  const std::string& root() const { return root_; }

  /// A PF with `numvfs` VFs enabled and netdev `netdev` ("" = none).
  void add_pf(const std::string& pci, const std::string& netdev, int numvfs, const std::string& driver = "mlx5_core") {
    std::string d = dev(pci);
    std::filesystem::create_directories(d);
    write(d + "/sriov_numvfs", std::to_string(numvfs) + "\n");
    write(d + "/sriov_totalvfs", "8\n");
    if (!netdev.empty()) std::filesystem::create_directories(d + "/net/" + netdev);
    bind(pci, driver);
  }
  /// VF `index` of PF `pf`, bound to `driver`, with netdev and RDMA device when not "".
  void add_vf(const std::string& pf, int index, const std::string& pci, const std::string& driver, const std::string& netdev = "",
              const std::string& rdma = "") {
    std::string d = dev(pci);
    std::filesystem::create_directories(d);
    std::filesystem::create_directory_symlink("../" + pf, d + "/physfn");
    std::filesystem::create_directory_symlink("../" + pci, dev(pf) + "/virtfn" + std::to_string(index));
    bind(pci, driver);
    if (!netdev.empty()) std::filesystem::create_directories(d + "/net/" + netdev);
    if (!rdma.empty()) std::filesystem::create_directories(d + "/infiniband/" + rdma);
  }
  /// vDPA device `name` on PCI device `pci`, bound to `driver` (vhost_vdpa: with vhost-vdpa-<n>;
  /// virtio_vdpa: with virtio<n>/net/<netdev>).
  void add_vdpa(const std::string& name, const std::string& pci, const std::string& driver, int n, const std::string& netdev = "") {
    std::string d = dev(pci) + "/" + name;
    std::filesystem::create_directories(d);
    std::filesystem::create_directories(root_ + "/bus/vdpa/devices");
    std::filesystem::create_directories(root_ + "/bus/vdpa/drivers/" + driver);
    std::filesystem::create_directory_symlink("../../pci/devices/" + pci + "/" + name, root_ + "/bus/vdpa/devices/" + name);
    std::filesystem::create_directory_symlink("../../../../vdpa/drivers/" + driver, d + "/driver");
    if (driver == "vhost_vdpa") std::filesystem::create_directories(d + "/vhost-vdpa-" + std::to_string(n));
    if (driver == "virtio_vdpa") std::filesystem::create_directories(d + "/virtio" + std::to_string(n) + "/net/" + netdev);
  }
  /// What was last written to bus/pci/drivers/<driver>/<verb> (bind, unbind).
  std::string driver_file(const std::string& driver, const std::string& verb) const {
    std::ifstream f(root_ + "/bus/pci/drivers/" + driver + "/" + verb);
    std::string s;
    std::getline(f, s);
    return s;
  }

 private:
  std::string dev(const std::string& pci) const { return root_ + "/bus/pci/devices/" + pci; }
  static void write(const std::string& path, const std::string& content) {
    std::ofstream f(path, std::ios::trunc);
    f << content;
  }
  void bind(const std::string& pci, const std::string& driver) {
    if (driver.empty()) return;
    std::string drv = root_ + "/bus/pci/drivers/" + driver;
    std::filesystem::create_directories(drv);
    for (const char* verb : {"bind", "unbind"}) {
      if (!std::filesystem::exists(drv + "/" + verb)) write(drv + "/" + verb, "");
    }
    std::filesystem::create_directory_symlink("../../drivers/" + driver, dev(pci) + "/driver");
  }
  std::string root_;
};

/// PfOps that records every call ("get pf0 vf 1", "set pf0 vf 1 vlan 100 qos 3") and keeps each
/// VF's state, as a PF would, so restores can be checked against the starting state.
class RecordingPfOps final : public vf::PfOps {
 public:
  using VfState = vf::VfState;
  using VfSetting = vf::VfSetting;
  std::vector<std::string> log;
  std::map<std::pair<std::string, uint32_t>, VfState> vfs;
  /// When set, set() of this kind fails with EOPNOTSUPP as a driver without the feature would.
  std::optional<VfSetting::Kind> unsupported;

  Result<VfState> get_vf(const std::string& pf, uint32_t vf) override {
    log.push_back("get " + pf + " vf " + std::to_string(vf));
    auto it = vfs.find({pf, vf});
    if (it == vfs.end()) return fail(cni_code::kKernelFeature, "PF " + pf + " reports no VF " + std::to_string(vf));
    return it->second;
  }
  Status set(const std::string& pf, const VfSetting& s) override {
    log.push_back("set " + pf + " " + s.describe());
    if (unsupported && *unsupported == s.kind) {
      return fail(cni_code::kKernelFeature, "set " + s.describe() + " on PF " + pf + ": not supported (EOPNOTSUPP)");
    }
    auto& st = vfs[{pf, s.vf}];
    using K = VfSetting::Kind;
    switch (s.kind) {
      case K::Mac: st.mac = s.mac; break;
      case K::Vlan: st.vlan = s.vlan; st.qos = s.qos; st.vlan_proto = 0x8100; break;
      case K::VlanList: st.vlan = s.vlan; st.qos = s.qos; st.vlan_proto = s.vlan_proto; break;
      case K::Rate: st.min_tx_rate = s.min_tx_rate; st.max_tx_rate = s.max_tx_rate; break;
      case K::SpoofChk: st.spoofchk = s.on; break;
      case K::Trust: st.trust = s.on; break;
      case K::LinkState: st.link_state = s.link_state; break;
      case K::NodeGuid: st.node_guid = s.guid; break;
      case K::PortGuid: st.port_guid = s.guid; break;
    }
    return {};
  }
};

/// Compares two VF states field by field.
inline bool same_state(const vf::VfState& a, const vf::VfState& b) {
  return a.vf == b.vf && a.mac == b.mac && a.vlan == b.vlan && a.qos == b.qos && a.vlan_proto == b.vlan_proto &&
         a.spoofchk == b.spoofchk && a.trust == b.trust && a.link_state == b.link_state && a.min_tx_rate == b.min_tx_rate &&
         a.max_tx_rate == b.max_tx_rate && a.node_guid == b.node_guid && a.port_guid == b.port_guid;
}

/// An RDMA backend that records moves (device, inode of the source namespace, inode of the target
/// namespace) and answers a configurable netns mode.
class FakeRdma final : public rdma::Ops {
 public:
  struct Move {
    std::string dev;
    unsigned long from_ino, to_ino;
  };
  rdma::NetnsMode mode = rdma::NetnsMode::Exclusive;
  std::vector<Move> moves;
  Result<rdma::NetnsMode> netns_mode() override { return mode; }
  Status move(const std::string& dev, int from, int to) override {
    struct stat a {}, b {};
    ::fstat(from, &a);
    ::fstat(to, &b);
    moves.push_back({dev, a.st_ino, b.st_ino});
    return {};
  }
};

/// A vDPA listing given by the test.
class FakeVdpa final : public vdpa::Lister {
 public:
  std::vector<vdpa::Device> devices;
  Result<std::vector<vdpa::Device>> list() override { return devices; }
};

}  // namespace plumb::test
