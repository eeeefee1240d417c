// Shared steps, not a driver: what the sriov, ib-sriov and vdpa drivers (sriov.cpp, ib_sriov.cpp,
// vdpa.cpp) each do with a VF, written once, like common.cpp is for every driver. The drivers call
// these steps and the engine (engine/kernel/pci.hpp for sysfs, engine/kernel/vf.hpp for PF-side
// settings, rdma.hpp, vdpa.hpp), never each other.
//
//   parse    device_id (the VF's PCI address), parse_link_state
//   claim    the per-VF lock and allocation record under <stateDir>/sriov/ (one VF is never given
//            to two pods; a record whose pod namespace is gone is reclaimed)
//   PF side  apply_pf_settings: the restore list recorded, then the settings applied in order
//   netdev   register_return_netdev + move_netdev: into the pod under ctx.ifname and back
//   result   pod_result (IPAM, the pod interface, addresses) and finish_pci_vf (+ pci device-info)
//   check    check_attachment
//
// Every change is a step (drivers/steps.hpp: ReclaimVf, ClaimVf, SetVfSettings, ReloadVfDriver,
// TakeVfNetdev, ChangeVfNetdev, MoveVfNetdev, MoveRdmaIntoPod) whose inverse the executor records
// first. The kernel backends are DefaultBackends (the netlink implementations), or recording fakes
// while a test holds a BackendsOverride.
//
// The VF undo operations (drivers/undo.hpp VfRelease, VfRestore, VfReturnNetdev, RdmaReturn) are
// executed in vf_attach.cpp. Each first checks that the VF's allocation record is not owned by
// another container, so a DEL of a pod whose VF was reclaimed after its namespace vanished leaves
// the new owner alone. return_netdev succeeds when the pod namespace is gone (the kernel returns
// physical netdevs itself). A VF rebound to its driver has a new netdev in the node:
// return_netdev finds it through sysfs (the VF's net/) when its original name is not there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/driver.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/rdma.hpp"
#include "engine/kernel/vdpa.hpp"
#include "engine/kernel/vf.hpp"
#include "engine/state/state.hpp"

namespace plumb::drivers::vf_attach {

// --- the allocation record ----------------------------------------------------------------------

/// The allocation record of one VF: <stateDir>/sriov/<pci> (JSON: {"pci", "type", "containerID",
/// "ifname", "netns", "mode", "pf", "restore": [VfSetting...]}), guarded by the flock
/// <stateDir>/sriov/<pci>.lock.
struct Allocation {
  std::string pci;
  std::string type;  ///< the driver: "sriov", "ib-sriov", "vdpa"
  std::string container_id;
  std::string ifname;
  std::string netns;                   ///< CNI_NETNS of the owner: when it is gone the record is stale
  std::string mode;                    ///< "netdev", "userspace", "vhost", "virtio"
  std::string pf;                      ///< the PF netdev the settings below apply to
  std::vector<vf::VfSetting> restore;  ///< the owner's saved PF settings, applied by a reclaim
};

/// Reads VF `pci`'s allocation record under `state_dir`; nullopt when there is none.
/// Errors: kIo naming the file; kDecode for a malformed record.
[[nodiscard]] Result<std::optional<Allocation>> read_allocation(const std::string& state_dir, const std::string& pci);
/// Writes it atomically (engine/base/file.hpp write_atomic). Errors: kIo naming the file.
[[nodiscard]] Status write_allocation(const std::string& state_dir, const Allocation& a);

// --- kernel backends ----------------------------------------------------------------------------

/// The kernel backends the three drivers use (non-owning).
struct Backends {
  vf::PfOps* pf = nullptr;
  rdma::Ops* rdma = nullptr;
  vdpa::Lister* vdpa = nullptr;
};

/// The netlink implementations of every backend, for one invocation (PF ops on ctx.node).
struct DefaultBackends {
  explicit DefaultBackends(Context& ctx);
  vf::NetlinkPfOps pf;
  rdma::NetlinkOps rdma;
  vdpa::GenlLister vdpa;
  Backends backends;
};
/// Tests without SR-IOV hardware: while one exists, the VF drivers and the VF undo operations of
/// every invocation in this process use `b` (recording fakes) instead of the netlink
/// implementations. Nests (the previous override is back once this one is destroyed); plumb
/// itself never makes one.
class BackendsOverride {
 public:
  explicit BackendsOverride(Backends& b);
  ~BackendsOverride();
  BackendsOverride(const BackendsOverride&) = delete;
  BackendsOverride& operator=(const BackendsOverride&) = delete;

 private:
  Backends* previous_;
};
/// The overriding backends when a BackendsOverride exists, else `defaults`' netlink implementations.
[[nodiscard]] Backends& backends_of(DefaultBackends& defaults);

// --- parse --------------------------------------------------------------------------------------

/// The attachment's VF PCI address (parse time): runtimeConfig.deviceID (from the runtime or device
/// plugin) wins over the config's "deviceID". `type` names the driver in errors. Errors:
/// kInvalidConfig naming the key when it is not a PCI address, or naming the network when neither
/// is set (a NAD with k8s.v1.cni.cncf.io/resourceName gets kubelet's device injected by the plan,
/// cni-entry/pod/devices.hpp, so this means a NAD without it).
[[nodiscard]] Result<std::string> device_id(const json::Value& conf, const ParseInput& in, std::string_view type);
/// The config's "link_state" ("auto", "enable", "disable"); nullopt when absent. Errors:
/// kInvalidConfig "<where>.link_state \"<value>\" must be ...".
[[nodiscard]] Result<std::optional<vf::LinkState>> parse_link_state(const json::Value& conf, const std::string& where);

// --- ADD steps, in the order a driver runs them -------------------------------------------------

/// Fails with kConflict when ctx.ifname already exists in the pod (CNI: ADD must fail then);
/// kInvalidEnv without a pod namespace.
[[nodiscard]] Status ensure_ifname_free(Context& ctx);

/// A VF held by this ADD: the allocation record is written and its release registered; the lock
/// serialises claims of the same VF and is held until the Claim is destroyed.
struct Claim {
  state::FileLock lock;
  Allocation alloc;
};
/// Claims `dev` for ctx.container_id/ctx.ifname as driver `type` in `mode` (Allocation::mode).
/// An existing record of the same container and interface is taken over; one whose netns is gone
/// is reclaimed (its saved PF settings are restored first through b.pf); one whose netns exists is
/// a kConflict error naming the owner. Registers "<type>.release" before writing the record.
/// Errors: kInternal without ctx.state_dir; the state directory's and the PF backend's errors.
[[nodiscard]] Result<Claim> claim(Context& ctx, Backends& b, std::string_view type, const pci::VfDevice& dev,
                                  const std::string& mode);
/// Records `restore` (what undoes `apply`, in restore order) in the allocation, then applies
/// `apply` one setting per message through b.pf on PF netdev `pf`, in order, and with
/// `rebind_now` rebinds the VF's `rebind_driver` (steps::SetVfSettings: "<type>.restore_vf" with
/// `rebind_driver` when the VF must be rebound after restoring, "" otherwise, recorded first).
/// Errors: kInternal without a PF backend; b.pf's and sysfs's errors, naming the VF.
[[nodiscard]] Status apply_pf_settings(Context& ctx, Backends& b, Claim& cl, std::string_view type,
                                       const std::string& pf, const std::vector<vf::VfSetting>& apply,
                                       const std::vector<vf::VfSetting>& restore, const std::string& rebind_driver,
                                       bool rebind_now = false);

/// The VF netdev as it was in the node before the ADD.
struct NetdevOrig {
  int index = 0;
  std::string name;
  std::vector<uint8_t> hwaddr;  ///< 6 bytes (Ethernet) or 20 (IPoIB)
  uint32_t mtu_bytes = 0;
};
/// Reads netdev `name` (of device `pci`) in the node and takes it (steps::TakeVfNetdev:
/// "<type>.return_netdev" recorded; what to restore: the MAC only with mac_change, the MTU only
/// with mtu_change). Errors: kNotFound when the netdev sysfs names is not in the node
/// namespace; the kernel's.
[[nodiscard]] Result<NetdevOrig> register_return_netdev(Context& ctx, std::string_view type, const std::string& pci,
                                                        const std::string& name, bool mac_change, bool mtu_change);
/// Makes VF netdev `orig` (still in the node) carry `mac`, which its PF was just told: set on the
/// netdev when it has another; a VF driver that refuses that (igbvf answers EADDRNOTAVAIL: a MAC
/// set through the PF reaches it only when it reloads) is reloaded — "<type>.restore_vf" with no
/// settings and rebind_driver registered first, then unbind and bind — and its new netdev renamed
/// back to orig.name (orig.index follows). Errors: the kernel's and sysfs's, naming the VF;
/// kNotFound when the VF has no netdev after the reload.
[[nodiscard]] Status take_pf_mac(Context& ctx, const pci::VfDevice& dev, NetdevOrig& orig, const Mac& mac);
/// Moves the netdev into the pod and renames it to ctx.ifname in one RTM_NEWLINK, then sets its
/// MAC and MTU (bytes) there in one message when given and different. Returns the pod-side link.
/// Errors: the kernel's (EEXIST when the name is taken), naming the netdev and the namespace.
[[nodiscard]] Result<link::LinkInfo> move_netdev(Context& ctx, const NetdevOrig& orig, const std::optional<Mac>& mac,
                                                 const std::optional<uint32_t>& mtu_bytes);

/// rdmaIsolation and the rdma plugin: moves RDMA device `device` (of device `pci`) into the pod
/// through b.rdma (steps::MoveRdmaIntoPod: "<type>.rdma_return" recorded first). Errors: kInternal
/// without an RDMA backend; the backend's, unprefixed (the caller names what it moved).
[[nodiscard]] Status move_rdma(Context& ctx, Backends& b, std::string_view type, const std::string& pci,
                               const std::string& device);

/// Runs IPAM and returns the result whose only interface is the pod's ctx.ifname, carrying PCI
/// address `pci` and every IP pointing at it: `moved` is the netdev now in the pod (its MAC and
/// MTU are reported; addresses, routes and up are configured here), nullptr for a device without
/// netdev in the pod (a userspace-driver VF or a vhost-vdpa device), reported with `mac` ("" for
/// none) and no MTU. Errors: IPAM's; configure_pod_interface's.
[[nodiscard]] Result<cni::CniResult> pod_result(Context& ctx, const IpamUse& ipam, const std::string& pci,
                                                const link::LinkInfo* moved, const std::string& mac);
/// The driver's part of device-info: completes ctx.device_info_file with `info` (a device-info
/// document, engine/devinfo/devinfo.hpp; nothing when the file is ""). Spec 5.3.8.
[[nodiscard]] Status complete_device_info(const Context& ctx, const json::Value& info);
/// The end of an SR-IOV/IB ADD once the VF is in place: pod_result, then the pci device-info of
/// `dev` (pci-address, pf-pci-address, rdma-device; spec 5.3.8).
[[nodiscard]] Result<cni::CniResult> finish_pci_vf(Context& ctx, const IpamUse& ipam, const pci::VfDevice& dev,
                                                   const link::LinkInfo* moved, const std::string& mac);

// --- CHECK --------------------------------------------------------------------------------------

/// CHECK for the three drivers: VF `pci` is still allocated to this attachment and, for a netdev
/// attachment (mode "netdev" or "virtio"), the pod interface exists and is up. Errors: kKernel
/// "CHECK: ..." naming what differs.
[[nodiscard]] Status check_attachment(Context& ctx, const std::string& pci);

}  // namespace plumb::drivers::vf_attach
