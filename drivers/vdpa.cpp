// vDPA attachments: the vDPA device whose management device is the VF `deviceID` (or
// runtimeConfig.deviceID), found through the "vdpa" generic netlink family (VDPA_CMD_DEV_GET dump)
// and sysfs. Keys: deviceID, mtu, ipam.
//   vhost_vdpa-bound:  nothing moves; the pod's runtime hands /dev/vhost-vdpa-N to the workload
//                      (device plugin); the path is reported in device-info; IPAM results only.
//   virtio_vdpa-bound: the virtio netdev (virtioN/net/<name>) moves into the pod like a VF netdev.
// The VF is claimed like an SR-IOV VF (lock + allocation record), so a VF's vDPA device is never
// given to two pods. A kernel without the vdpa family fails with a clear kKernelFeature error.
// The VF steps shared with sriov and ib-sriov are drivers/vf_attach.hpp's.
#include "drivers/registry.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/vdpa.hpp"

namespace plumb::drivers {
namespace {

/// The vdpa plugin's configuration, validated.
struct VdpaConfig : Config {
  std::string device_id;
  std::optional<uint32_t> mtu_bytes;
};

Result<VdpaConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  VdpaConfig c;
  c.device_id = PLUMB_TRY(vf_attach::device_id(conf, in, "vdpa"));
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, in.network));
  return c;
}

/// The vDPA device whose management device is PCI device `id`, through b.vdpa. Errors: the
/// listing's (kKernelFeature without the vdpa family), kNotFound when no device matches.
Result<vdpa::Device> find_device(Context& ctx, vf_attach::Backends& b, const std::string& id) {
  if (b.vdpa == nullptr) return fail(cni_code::kInternal, "vdpa: no device listing backend");
  auto devices = b.vdpa->list();
  if (!devices) return std::unexpected(devices.error().within(ctx.network + ": find the vDPA device of " + id));
  auto vd = vdpa::find_by_pci(*devices, id);
  if (!vd)
    return fail(cni_code::kNotFound,
                ctx.network + ": no vDPA device has PCI device " + id + " as its management device");
  return *vd;
}

Result<cni::CniResult> vdpa_add(Context& ctx, const VdpaConfig& c, const cni::CniResult*) {
  vf_attach::DefaultBackends defaults(ctx);
  vf_attach::Backends& b = vf_attach::backends_of(ctx, defaults);
  const std::string& where = ctx.network;
  pci::VfDevice dev = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, c.device_id, false, where + ".deviceID"));
  vdpa::Device vd = PLUMB_TRY(find_device(ctx, b, c.device_id));
  vdpa::Binding bind = PLUMB_TRY(vdpa::read_binding(ctx.sysfs_root, vd.name));
  std::string mode;
  if (bind.driver == "vhost_vdpa") {
    mode = "vhost";
  } else if (bind.driver == "virtio_vdpa") {
    mode = "virtio";
    PLUMB_TRY(vf_attach::ensure_ifname_free(ctx));
  } else {
    return fail(cni_code::kInvalidConfig, where + ": vDPA device " + vd.name + " is bound to " +
                                              (bind.driver.empty() ? std::string("no driver") : bind.driver) +
                                              "; plumb supports vhost_vdpa and virtio_vdpa");
  }

  vf_attach::Claim cl = PLUMB_TRY(vf_attach::claim(ctx, b, "vdpa", dev, mode));
  std::optional<link::LinkInfo> moved;  // virtio: the netdev now in the pod
  if (mode == "virtio") {
    auto orig =
        PLUMB_TRY(vf_attach::register_return_netdev(ctx, "vdpa", dev.pci, bind.netdev, false, c.mtu_bytes.has_value()));
    moved = PLUMB_TRY(vf_attach::move_netdev(ctx, orig, std::nullopt, c.mtu_bytes));
  }
  cni::CniResult r = PLUMB_TRY(vf_attach::pod_result(ctx, c.ipam, dev.pci, moved ? &*moved : nullptr, ""));
  devinfo::VdpaInfo info;
  info.parent_device = vd.name;
  info.driver = mode;
  info.path = bind.vhost_path;
  info.pci_address = dev.pci;
  info.pf_pci_address = dev.pf_pci;
  PLUMB_TRY(vf_attach::complete_device_info(ctx, devinfo::make_vdpa(info)));
  return r;
}

Status vdpa_check(Context& ctx, const VdpaConfig& c, const cni::CniResult&) {
  return vf_attach::check_attachment(ctx, c.device_id);
}

}  // namespace

const Driver kVdpa = make_driver<VdpaConfig, parse_config, vdpa_add, vdpa_check>("vdpa");

}  // namespace plumb::drivers
