// What the sriov, ib-sriov and vdpa drivers share: the VF found from sysfs, the per-VF lock and
// allocation record (one VF is never given to two pods), the VF netdev moved into the pod and back,
// and the kernel backends (PF settings, RDMA, vDPA listing): Context::vf_backends when a test sets
// recording fakes, else the netlink implementations (DefaultBackends).
//
// Undo operations (drivers/undo.hpp VfRelease, VfRestore, VfReturnNetdev, RdmaReturn; executed
// in sriov_vf.cpp) all check first that the VF's allocation record is not owned by another
// container, so a DEL of a pod whose VF was reclaimed after its namespace vanished leaves the new
// owner alone. return_netdev succeeds when the pod namespace is gone (the kernel returns physical
// netdevs itself).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "drivers/driver.hpp"
#include "drivers/sriov_pf.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/rdma.hpp"
#include "engine/state/state.hpp"
#include "engine/kernel/vdpa.hpp"

namespace plumb::drivers::sriov {

/// A PCI device as sysfs (<root>/bus/pci/devices/<pci>) describes it.
struct VfDevice {
  std::string pci;           // the device's PCI address (the deviceID)
  std::string pf_pci;        // basename of the physfn link, "" when not a VF
  std::string pf_netdev;     // first entry of <pf>/net/, "" if none
  uint32_t vf_index = 0;     // N of the PF's virtfnN link pointing at pci
  std::string driver;        // basename of the driver link, "" when unbound
  std::string netdev;        // first entry of net/, "" if none
  std::string rdma_device;   // first entry of infiniband/, "" if none
  /// Bound to a userspace (DPDK/VFIO) driver: vfio-pci, uio_pci_generic, igb_uio.
  [[nodiscard]] bool userspace() const;
};

/// True for a PCI address "dddd:bb:dd.f" (hex domain, bus, device 00-1f, function 0-7).
[[nodiscard]] bool valid_pci_address(std::string_view s);
/// Reads a PCI device from sysfs. With require_vf, a device without physfn/virtfnN is an error.
/// Errors: kInvalidConfig for a malformed address or a device that is not a VF; kNotFound when
/// the device is not in sysfs, each naming `what` (the config key) and the address.
[[nodiscard]] Result<VfDevice> lookup_device(const std::string& sysfs_root, const std::string& pci, bool require_vf,
                                             const std::string& what);

/// The allocation record of one VF: <stateDir>/sriov/<pci> (JSON), guarded by the flock
/// <stateDir>/sriov/<pci>.lock.
struct Allocation {
  std::string pci;
  std::string type;          // the driver: "sriov", "ib-sriov", "vdpa"
  std::string container_id;
  std::string ifname;
  std::string netns;         // CNI_NETNS of the owner: when it is gone the record is stale
  std::string mode;          // "netdev", "userspace", "vhost", "virtio"
  std::string pf;            // the PF netdev the settings below apply to
  std::vector<VfSetting> restore;  // the owner's saved PF settings, applied by a reclaim
};

/// Reads a VF's allocation record; nullopt when none.
[[nodiscard]] Result<std::optional<Allocation>> read_allocation(const std::string& state_dir, const std::string& pci);
/// Writes it atomically.
[[nodiscard]] Status write_allocation(const std::string& state_dir, const Allocation& a);

/// The kernel backends the three drivers use.
struct Backends {
  PfOps* pf = nullptr;
  rdma::Ops* rdma = nullptr;
  vdpa::Lister* vdpa = nullptr;
};

/// The netlink implementations of every backend, for one invocation.
struct DefaultBackends {
  explicit DefaultBackends(Context& ctx);
  NetlinkPfOps pf;
  rdma::NetlinkOps rdma;
  vdpa::GenlLister vdpa;
  Backends backends;
};
/// ctx.vf_backends when set (tests), else `defaults`' netlink implementations.
[[nodiscard]] Backends& backends_of(Context& ctx, DefaultBackends& defaults);

/// CHECK for the three drivers: VF `pci` is still allocated to this attachment and, for a netdev
/// attachment, the pod interface exists and is up.
[[nodiscard]] Status check_attachment(Context& ctx, const std::string& pci);

// ---------------------------------------------------------------------------------------------
// Building blocks of the three drivers (sriov.cpp, ib_sriov.cpp, vdpa.cpp).

/// The attachment's VF PCI address (parse time): runtimeConfig.deviceID (from the runtime or device
/// plugin) wins over the config's "deviceID". Errors: kInvalidConfig naming the network when
/// neither is set (plumb does not look devices up through kubelet's pod-resources API yet).
[[nodiscard]] Result<std::string> device_id(const json::Value& conf, const ParseInput& in, std::string_view type);
/// Fails with kConflict when ctx.ifname already exists in the pod (CNI: ADD must fail then).
[[nodiscard]] Status ensure_ifname_free(Context& ctx);

/// A VF held by this ADD: the allocation record is written and its release registered; the lock
/// serialises claims of the same VF and is held until the Claim is destroyed.
struct Claim {
  state::FileLock lock;
  Allocation alloc;
};
/// Claims `dev` for ctx.container_id/ctx.ifname. An existing record of the same container and
/// interface is taken over; one whose netns is gone is reclaimed (its saved PF settings are
/// restored first through b.pf); one whose netns exists is a kConflict error naming the owner.
[[nodiscard]] Result<Claim> claim(Context& ctx, Backends& b, std::string_view type, const VfDevice& dev,
                                  const std::string& mode);
/// Records `restore` in the allocation, registers "<type>.restore_vf" (with `rebind_driver` when
/// the VF must be rebound after restoring, "" otherwise), then applies `apply` one setting per
/// message through b.pf, in order. Errors name the setting that failed.
[[nodiscard]] Status apply_pf_settings(Context& ctx, Backends& b, Claim& cl, std::string_view type, const std::string& pf,
                                       const std::vector<VfSetting>& apply, const std::vector<VfSetting>& restore,
                                       const std::string& rebind_driver);
/// Unbinds and binds the VF again (writes its address to <root>/bus/pci/drivers/<driver>/unbind,
/// then .../bind), as ib-sriov-cni does so a new GUID takes effect. Errors: errno naming the file.
[[nodiscard]] Status rebind_vf(const std::string& sysfs_root, const std::string& pci, const std::string& driver);

/// The VF netdev as it was in the node before the ADD.
struct NetdevOrig {
  int index = 0;
  std::string name;
  std::vector<uint8_t> hwaddr;
  uint32_t mtu_bytes = 0;
};
/// Reads netdev `name` in the node and registers "<type>.return_netdev" for it (what to restore:
/// the MAC only with mac_change, the MTU only with mtu_change). Errors: kNotFound when the netdev
/// sysfs names is not in the node namespace.
[[nodiscard]] Result<NetdevOrig> register_return_netdev(Context& ctx, std::string_view type, const std::string& pci,
                                                        const std::string& name, bool mac_change, bool mtu_change);
/// Moves the netdev into the pod and renames it to ctx.ifname in one RTM_NEWLINK, then sets its MAC
/// and MTU there (one message). Returns the pod-side link. Errors: kConflict when the name is taken.
[[nodiscard]] Result<link::LinkInfo> move_netdev(Context& ctx, const NetdevOrig& orig, const std::optional<Mac>& mac,
                                                 const std::optional<uint32_t>& mtu_bytes);
/// The driver's part of device-info: completes ctx.device_info_file (nothing when it is "").
[[nodiscard]] Status complete_device_info(const Context& ctx, const json::Value& info);

/// The end of an SR-IOV/IB ADD once the VF is in place: runs IPAM and returns the result whose
/// only interface is the pod's (`moved`: the VF netdev now in the pod, whose addresses and routes
/// are configured here; nullptr for a userspace-driver VF, reported with `mac` and no netdev),
/// carrying the VF's PCI address; then completes the pci device-info (spec 5.3.8).
[[nodiscard]] Result<cni::CniResult> finish_pci_vf(Context& ctx, const IpamUse& ipam, const VfDevice& dev,
                                                    const link::LinkInfo* moved, const std::string& mac);

}  // namespace plumb::drivers::sriov
