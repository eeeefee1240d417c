// PCI devices as sysfs shows them, a typed kernel object: <root>/bus/pci/devices/<address>, where
// <root> is plumb's sysfsRoot ("/sys" in production, a fake tree in the tests; never hard-coded).
// Facts (specs/README.md, "SR-IOV / InfiniBand / vDPA kernel interfaces"):
//
//   <root>/bus/pci/devices/<vf>/physfn        -> ../<pf>        the VF's PF (absent: not a VF)
//   <root>/bus/pci/devices/<pf>/virtfnN       -> ../<vf>        N is the VF index
//   <root>/bus/pci/devices/<pf>/sriov_numvfs  "4\n"             VFs enabled on the PF
//   <root>/bus/pci/devices/<dev>/driver       -> .../drivers/<name>
//   <root>/bus/pci/devices/<dev>/net/<netdev>                   its network interface, if any
//   <root>/bus/pci/devices/<dev>/infiniband/<rdma device>       its RDMA device, if any
//   <root>/bus/pci/drivers/<name>/{unbind,bind}                 write an address to (un)bind it
//   <root>/bus/auxiliary/devices/<name>/infiniband/<rdma dev>   an auxiliary device's (e.g. a
//                                                               mlx5 sub-function, "mlx5_core.sf.4") RDMA device
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::pci {

/// A PCI device (usually an SR-IOV VF) as sysfs describes it. Names are "" when absent.
struct VfDevice {
  std::string pci;          ///< the device's PCI address "dddd:bb:dd.f" (the deviceID)
  std::string pf_pci;       ///< basename of the physfn link, "" when not a VF
  std::string pf_netdev;    ///< first entry (sorted) of <pf>/net/, "" if none
  uint32_t vf_index = 0;    ///< N of the PF's virtfnN link pointing at pci
  std::string driver;       ///< basename of the driver link, "" when unbound
  std::string netdev;       ///< first entry (sorted) of net/, "" if none
  std::string rdma_device;  ///< first entry (sorted) of infiniband/, "" if none
  /// Bound to a userspace (DPDK/VFIO) driver: vfio-pci, uio_pci_generic, igb_uio. Such a device
  /// has no netdev to move.
  [[nodiscard]] bool userspace() const;
};

/// True for a PCI address "dddd:bb:dd.f" (hex domain and bus, device 00-1f, function 0-7). Only
/// such a string is ever used to build a sysfs or state path.
[[nodiscard]] bool valid_pci_address(std::string_view s);

/// Reads PCI device `pci` under `sysfs_root`. With require_vf, a device without physfn is an
/// error. `what` (the config key, e.g. "net1.deviceID") starts every message.
/// Errors: kInvalidConfig for a malformed address, a device that is not a VF, a VF its PF does
/// not list (no virtfnN link) or whose index is not below the PF's sriov_numvfs; kNotFound when
/// the device is not in sysfs; kIo when a directory cannot be read.
[[nodiscard]] Result<VfDevice> lookup_device(const std::string& sysfs_root, const std::string& pci, bool require_vf,
                                             const std::string& what);

/// One VF as its PF lists it (a virtfnN link).
struct PfVf {
  std::string pf_pci;
  std::string pf_netdev;  ///< first entry (sorted) of <pf>/net/, "" if none
  uint32_t vf_index = 0;
  std::string vf_pci;
};
/// Every VF of every PF under <root>/bus/pci/devices, by PF then index. Errors: kIo when a
/// directory cannot be read.
[[nodiscard]] Result<std::vector<PfVf>> list_vfs(const std::string& sysfs_root);

/// The RDMA devices (sorted entries of infiniband/) of `device`: a PCI address, or else the name of
/// an auxiliary device (bus/auxiliary/devices/<name>), as rdma-cni accepts. Empty when it has none.
/// Errors: kInvalidConfig for a name that is neither (or holds '/'); kNotFound when the device is
/// not in sysfs; kIo.
[[nodiscard]] Result<std::vector<std::string>> rdma_devices(const std::string& sysfs_root, const std::string& device);

/// Unbinds device `pci` from `driver` and binds it again (writes the address to
/// <root>/bus/pci/drivers/<driver>/unbind, then .../bind), as ib-sriov-cni does so a new GUID
/// takes effect; a device bound to no driver is only bound. Errors: the errno of the open or write, naming the file.
[[nodiscard]] Status rebind(const std::string& sysfs_root, const std::string& pci, const std::string& driver);

}  // namespace plumb::pci
