// vDPA devices over the "vdpa" generic netlink family (what `vdpa dev show` asks), and where a
// vDPA device's driver and endpoints are in sysfs.
//
//   resolve the family:  GENL_ID_CTRL | genlmsghdr{CTRL_CMD_GETFAMILY, v1} | CTRL_ATTR_FAMILY_NAME "vdpa"
//                        reply: CTRL_ATTR_FAMILY_ID u16 (ENOENT: no vdpa family in this kernel)
//   list the devices:    <family id> [REQUEST|DUMP] | genlmsghdr{VDPA_CMD_DEV_GET (5), v1}
//                        each reply: VDPA_ATTR_MGMTDEV_BUS_NAME(1) "pci", VDPA_ATTR_MGMTDEV_DEV_NAME(2)
//                        "0000:65:00.2", VDPA_ATTR_DEV_NAME(4) "vdpa0"
//
// sysfs (root is plumb's sysfsRoot): <root>/bus/vdpa/devices/<dev>/driver -> .../vhost_vdpa or
// .../virtio_vdpa; a vhost_vdpa device holds a `vhost-vdpa-N` entry (char device /dev/vhost-vdpa-N);
// a virtio_vdpa device holds a `virtioN` directory whose `net/` has the netdev.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::vdpa {

/// One vDPA device as VDPA_CMD_DEV_GET reports it.
struct Device {
  std::string name;        // VDPA_ATTR_DEV_NAME, e.g. "vdpa0"
  std::string mgmt_bus;    // VDPA_ATTR_MGMTDEV_BUS_NAME, e.g. "pci" ("" for a bus-less management device)
  std::string mgmt_dev;    // VDPA_ATTR_MGMTDEV_DEV_NAME, e.g. "0000:65:00.2"
};

/// The source of the vDPA device listing. Implementations: GenlLister (the plumb binary) and an
/// in-process fake in the tests.
class Lister {
 public:
  virtual ~Lister() = default;
  /// Every vDPA device of the node. Errors: kKernelFeature when the kernel has no "vdpa" family.
  [[nodiscard]] virtual Result<std::vector<Device>> list() = 0;
};

/// Lists through the "vdpa" generic netlink family, on the calling thread's shared
/// NETLINK_GENERIC socket of its current namespace (netlink::shared).
class GenlLister final : public Lister {
 public:
  Result<std::vector<Device>> list() override;
};

/// CTRL_CMD_GETFAMILY for `name` (flags REQUEST).
[[nodiscard]] netlink::Message build_get_family(const std::string& name);
/// VDPA_CMD_DEV_GET dump on family `family_id` (flags REQUEST|DUMP).
[[nodiscard]] netlink::Message build_dev_get_dump(uint16_t family_id);
/// Parses one VDPA_CMD_DEV_GET reply. Errors: EINVAL for malformed attributes, kDecode when the
/// device name is missing.
[[nodiscard]] Result<Device> parse_device(const nlmsghdr* nlh);
/// Resolves a generic netlink family's id on `genl`. Errors: kKernelFeature naming the family when
/// the kernel does not know it (ENOENT).
[[nodiscard]] Result<uint16_t> resolve_family(netlink::Socket& genl, const std::string& name);

/// The device whose management device is PCI device `pci`; nullopt when none.
[[nodiscard]] std::optional<Device> find_by_pci(const std::vector<Device>& devices, const std::string& pci);

/// True for a vDPA device name plumb accepts in a path: 1-64 characters of [A-Za-z0-9._:-], not
/// "." or ".." (a device name never holds '/'; VDUSE's and the vendors' names fit).
[[nodiscard]] bool valid_device_name(std::string_view name);

/// What sysfs says about a vDPA device.
struct Binding {
  std::string driver;      // basename of the driver link: "vhost_vdpa", "virtio_vdpa", "" if unbound
  std::string vhost_path;  // vhost_vdpa: "/dev/vhost-vdpa-N"
  std::string netdev;      // virtio_vdpa: the netdev in virtioN/net/
};
/// Reads <root>/bus/vdpa/devices/<dev>. Errors: kNotFound naming the path when the device is not
/// in sysfs; kKernelFeature when a bound vhost_vdpa device has no vhost-vdpa-N entry or a
/// virtio_vdpa device no netdev.
[[nodiscard]] Result<Binding> read_binding(const std::string& sysfs_root, const std::string& dev);

}  // namespace plumb::vdpa
