// Real SR-IOV VFs for the full-kernel tier's igb cases: the guest (tests/full-kernel/guest) has two
// Intel 82576 NICs (QEMU's igb, MACs 52:54:00:12:00:01 and :02) on one internal hub, driven by the
// stock kernel's igb (PF) and igbvf (VF), with an emulated IOMMU for vfio-pci.
//
// A PCI driver registers its netdevs in the initial network namespace, and a VF rebound to its
// driver reappears there, as on a real node where plumb runs in the host's namespace. So the igb
// cases' node is the guest's initial namespace: IgbVfs enters it (and remounts sysfs so its
// net/ directories show that namespace's netdevs) only when the kernel command line carries
// plumb.full_kernel=1, which the tier's guest alone sets; elsewhere it fails the case before
// touching anything. The cases of every test file that use the NICs take turns (a flock on
// /run/plumb-igb.lock, the guest's tmpfs), and each case gets fresh VFs (sriov_numvfs) that its
// end removes again. Facts: specs/README.md, "A real SR-IOV NIC under QEMU".
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/pod_fixture.hpp"

namespace plumb::test {

/// The guest's two igb PFs with fresh VFs, for the lifetime of one case (declared after its Node).
class IgbVfs {
 public:
  struct Pf {
    std::string pci;     ///< "0000:01:00.0"
    std::string netdev;  ///< its netdev in the node (the guest's initial namespace)
  };

  /// Enters the guest's initial network namespace, finds both PFs, brings them up (traffic and
  /// max_tx_rate need link) and enables `numvfs` VFs on each, every one bound to igbvf with a
  /// netdev. REQUIREs all of it (a guest without the NICs fails the case).
  explicit IgbVfs(unsigned numvfs = 2) : numvfs_(numvfs) {
    REQUIRE_MESSAGE(read_file("/proc/cmdline").find("plumb.full_kernel=1") != std::string::npos,
                    "not the full-kernel tier's guest (no plumb.full_kernel=1 on the kernel command line): the igb "
                    "cases never enter this machine's initial network namespace");
    lock_ = ::open("/run/plumb-igb.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(lock_ >= 0);
    REQUIRE(::flock(lock_, LOCK_EX) == 0);
    home_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int init = ::open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
    REQUIRE(home_ >= 0);
    REQUIRE(init >= 0);
    REQUIRE(::setns(init, CLONE_NEWNET) == 0);
    ::close(init);
    REQUIRE(remount_sysfs());
    for (const char* mac : {"52:54:00:12:00:01", "52:54:00:12:00:02"}) pfs_.push_back(find_pf(mac));
    for (auto& pf : pfs_) {
      set_numvfs(pf, 0);  // a case that died left its VFs: start from none
      REQUIRE(sh("ip link set " + pf.netdev + " up").exit_code == 0);
      set_numvfs(pf, numvfs_);
    }
    for (auto& pf : pfs_) {
      wait_for([&] { return read_file(sys(pf) + "/net/" + pf.netdev + "/carrier").starts_with("1"); },
               "link on PF " + pf.netdev);
      for (unsigned i = 0; i < numvfs_; ++i) {
        wait_for([&] { return !vf_netdev(pf, i).empty(); }, "a netdev on VF " + std::to_string(i) + " of " + pf.netdev);
      }
    }
  }
  /// Removes the VFs (wherever their netdevs are), takes the PFs down and returns to the node
  /// namespace the case's Node made.
  ~IgbVfs() {
    for (auto& pf : pfs_) {
      std::ofstream(sys(pf) + "/sriov_numvfs") << 0;
      sh("ip link set " + pf.netdev + " down");
    }
    if (home_ >= 0) {
      (void)::setns(home_, CLONE_NEWNET);
      ::close(home_);
      (void)remount_sysfs();
    }
    if (lock_ >= 0) ::close(lock_);
  }
  IgbVfs(const IgbVfs&) = delete;
  IgbVfs& operator=(const IgbVfs&) = delete;

  const Pf& pf(unsigned i) const { return pfs_.at(i); }
  /// PCI address of VF `index` of PF `pf` (its virtfnN link).
  std::string vf_pci(unsigned pf, unsigned index) const {
    return std::filesystem::read_symlink(sys(pfs_.at(pf)) + "/virtfn" + std::to_string(index)).filename().string();
  }
  /// The VF's netdev in the node now ("" when it has none here: moved into a pod, or not igbvf).
  std::string vf_netdev(unsigned pf, unsigned index) const { return vf_netdev(pfs_.at(pf), index); }
  /// The driver the VF is bound to ("" when none).
  std::string vf_driver(unsigned pf, unsigned index) const {
    std::error_code ec;
    auto d = std::filesystem::read_symlink("/sys/bus/pci/devices/" + vf_pci(pf, index) + "/driver", ec);
    return ec ? std::string() : d.filename().string();
  }
  /// `ip -j -d link show <pf>`'s vfinfo_list entry of VF `index`, as JSON text (what the PF
  /// reports: mac, vlan_list, rate, spoofchk, trust ...), for equality checks and messages.
  std::string vfinfo(unsigned pf, unsigned index) const {
    auto d = ip_json("-d link show dev " + pfs_.at(pf).netdev);
    REQUIRE(d[0].HasMember("vfinfo_list"));
    for (auto& v : d[0]["vfinfo_list"].GetArray()) {
      if (v["vf"].GetUint() == index) return json_text(v);
    }
    FAIL("PF " << pfs_.at(pf).netdev << " lists no VF " << index);
    return {};
  }
  /// Binds VF `index` of PF `pf` to `driver` (driver_override, unbind, bind), as an operator
  /// prepares a VF for DPDK (vfio-pci) or gives it back (igbvf).
  void bind(unsigned pf, unsigned index, const std::string& driver) const {
    const std::string pci = vf_pci(pf, index), dev = "/sys/bus/pci/devices/" + pci;
    std::ofstream(dev + "/driver_override") << driver;
    if (!vf_driver(pf, index).empty()) std::ofstream(dev + "/driver/unbind") << pci;
    std::ofstream("/sys/bus/pci/drivers/" + driver + "/bind") << pci;
    REQUIRE(vf_driver(pf, index) == driver);
  }

  /// Waits (bounded: 20 s) until `done()`; FAILs naming `what` otherwise.
  template <class F>
  static void wait_for(F done, const std::string& what) {
    for (int i = 0; i < 200; ++i) {
      if (done()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("no " << what << " after 20 s");
  }
  static std::string json_text(const rapidjson::Value& v);

 private:
  static std::string sys(const Pf& pf) { return "/sys/bus/pci/devices/" + pf.pci; }
  std::string vf_netdev(const Pf& pf, unsigned index) const {
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(sys(pf) + "/virtfn" + std::to_string(index) + "/net", ec)) {
      return e.path().filename().string();
    }
    return {};
  }
  /// The igb PF whose netdev has permanent MAC `mac` (the guest's QEMU command line sets them).
  static Pf find_pf(const std::string& mac) {
    std::error_code ec;
    for (auto& d : std::filesystem::directory_iterator("/sys/bus/pci/drivers/igb", ec)) {
      const std::string pci = d.path().filename().string();
      if (!std::filesystem::exists(d.path() / "net")) continue;
      for (auto& n : std::filesystem::directory_iterator(d.path() / "net")) {
        if (read_file((n.path() / "address").string()).starts_with(mac)) return {pci, n.path().filename().string()};
      }
    }
    FAIL("no igb PF with MAC " << mac << " (the full-kernel guest has two: tests/full-kernel/guest)");
    return {};
  }
  static void set_numvfs(const Pf& pf, unsigned n) {
    if (read_file(sys(pf) + "/sriov_numvfs").starts_with(std::to_string(n) + "\n")) return;
    std::ofstream f(sys(pf) + "/sriov_numvfs");
    f << n;
    f.close();
    REQUIRE_MESSAGE(f.good(), "echo " << n << " > " << sys(pf) << "/sriov_numvfs failed");
  }
  /// sysfs shows the network namespace of whoever mounts it: remount for the current one.
  /// (A private bpffs on /sys/fs/bpf again, as Node mounts one.) False when a mount fails.
  static bool remount_sysfs() {
    ::umount2("/sys", MNT_DETACH);
    if (::mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) return false;
    return ::access("/sys/fs/bpf", F_OK) != 0 || ::mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") == 0;
  }

  unsigned numvfs_;
  int lock_ = -1, home_ = -1;
  std::vector<Pf> pfs_;
};

inline std::string IgbVfs::json_text(const rapidjson::Value& v) {
  rapidjson::Document d;
  d.CopyFrom(v, d.GetAllocator());
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

}  // namespace plumb::test
