// Device information (NPWG standard 5.3.8, device-info spec 1.1.0): the per-attachment file under
// <base>/cni/ that the delegating implementation owns, copied from the device plugin's file under
// <base>/dp/ when the NAD is annotated k8s.v1.cni.cncf.io/resourceName and the attachment has a
// deviceID, completed by the driver with what it found, put verbatim in the network-status entry's
// "device-info", and removed on DEL. <base> is plumb's deviceInfoDir
// (default /var/run/k8s.cni.cncf.io/devinfo).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/state/journal.hpp"

namespace plumb::devinfo {

/// The device-info spec version plumb writes.
inline constexpr std::string_view kSpecVersion = "1.1.0";
/// The runtimeConfig key / capability that hands the file's path to a plugin (CONVENTIONS.md).
inline constexpr std::string_view kCapability = "CNIDeviceInfoFile";

/// A "pci" device (device-info spec 1.1.0); empty strings are omitted from the JSON.
struct PciInfo {
  std::string pci_address;      // required: the VF's PCI address, e.g. "0000:03:00.2"
  std::string vhost_net;        // e.g. "/dev/vhost-net" (only device plugins know this)
  std::string rdma_device;      // e.g. "mlx5_2"
  std::string pf_pci_address;   // the PF's PCI address
  std::string representor_device;
};
/// A "vdpa" device (device-info spec 1.1.0); empty strings are omitted from the JSON.
struct VdpaInfo {
  std::string parent_device;    // the vdpa device name, e.g. "vdpa0"
  std::string driver;           // "vhost" or "virtio"
  std::string path;             // "/dev/vhost-vdpa-N" (vhost only)
  std::string pci_address;
  std::string pf_pci_address;
  std::string representor_device;
};

/// {"type":"pci","version":"1.1.0","pci":{...}} with the keys in the spec's order.
[[nodiscard]] json::Document make_pci(const PciInfo& info);
/// {"type":"vdpa","version":"1.1.0","vdpa":{...}} with the keys in the spec's order.
[[nodiscard]] json::Document make_vdpa(const VdpaInfo& info);

/// Checks the spec's shape: an object with string "type" (pci, vdpa, vhost-user, memif), string
/// "version", and an object under the type's key; "pci" needs "pci-address". Errors:
/// kInvalidConfig naming `what` and the offending key.
[[nodiscard]] Status validate(const json::Value& info, const std::string& what);

/// The device plugin's file: <base>/dp/<resourceName with '/' replaced by '-'>-<deviceID>-device.json.
[[nodiscard]] std::string dp_file(const std::string& base, std::string_view resource_name, std::string_view device_id);
/// plumb's per-attachment file: <base>/cni/<containerID>-<ifname>-device.json (container IDs and
/// interface names contain no '/').
[[nodiscard]] std::string cni_file(const std::string& base, std::string_view container_id, std::string_view ifname);

/// Reads and validates a device-info file; nullopt when it does not exist. Errors: kIo naming the
/// path, kDecode for bad JSON, kInvalidConfig for a bad shape.
[[nodiscard]] Result<std::optional<json::Document>> read(const std::string& path);
/// Writes `info` to `path` once: O_CREAT|O_EXCL, mode 0444, parent directories created (0755).
/// Errors: kConflict when the file already exists; errno naming the path otherwise.
[[nodiscard]] Status write_once(const std::string& path, const json::Value& info);
/// A driver's completion: merges what it found into the attachment's file. An absent file is
/// written once from `found` (no device-plugin file existed). An existing file of the same type
/// gains the keys of `found` it lacks (the device plugin's values win); it is replaced atomically
/// (temp file, mode 0444, rename), so readers never see a partial file. A file of another type is
/// left as the device plugin wrote it. Errors: I/O naming the path; kInvalidConfig for a bad
/// `found`.
[[nodiscard]] Status complete(const std::string& path, const json::Value& found);
/// Removes the file; a missing file is success. Errors: errno naming the path.
[[nodiscard]] Status remove(const std::string& path);

/// What the orchestrator decided for one attachment.
struct Plan {
  std::string resource_name;  // the NAD's k8s.v1.cni.cncf.io/resourceName, "" if none
  std::string device_id;      // the chain's deviceID (config or runtimeConfig), "" if none
  std::string file;           // the attachment's file under <base>/cni/, "" = no device-info
};

/// The deviceID of an attachment's plugin chain: the first plugin's "deviceID" or
/// runtimeConfig.deviceID (runtimeConfig wins), "" if none.
[[nodiscard]] std::string chain_device_id(const json::Value& plugins);
/// Planning (no file is touched): when plan.resource_name is set and the chain has a deviceID,
/// or when a plugin of the chain names its vDPA device itself ("vdpaDevice": a device no device
/// plugin allocated, such as a VDUSE device), sets plan.device_id (when any) and plan.file
/// (cni_file(base, container_id, ifname)) and puts the path as
/// runtimeConfig.CNIDeviceInfoFile into every plugin declaring that capability. `plugins` is the
/// attachment's array of plugin configs. Errors: kInternal when `plugins` is not an array.
[[nodiscard]] Status plan(json::Document& plugins, Plan& plan, const std::string& base, const std::string& container_id,
                          const std::string& ifname);
/// ADD, before the attachment's chain runs: registers the file's removal in the journal, then
/// copies the device plugin's file (validated) to plan.file when it exists (only with a
/// resource name and a deviceID). Does nothing when plan.file is empty. Errors: kConflict if plan.file exists already;
/// read/validate errors naming the device plugin's file; the journal's write errors.
[[nodiscard]] Status prepare(txn::Journal& journal, const std::string& base, const Plan& plan);

/// The undo operation {"op":"devinfo_remove","path":...} (a shared operation run by
/// drivers::run_undo).
[[nodiscard]] json::Document undo_remove(const std::string& path);
/// Executes it: removes the file, missing is success. Errors: kDecode for a malformed op.
[[nodiscard]] Status run_undo_remove(const json::Value& op);

}  // namespace plumb::devinfo
