// vDPA attachments: the vDPA device whose management device is the VF `deviceID` (or
// runtimeConfig.deviceID), found through the "vdpa" generic netlink family (VDPA_CMD_DEV_GET dump)
// and sysfs. Keys: deviceID, mtu, ipam.
//   vhost_vdpa-bound:  nothing moves; the pod's runtime hands /dev/vhost-vdpa-N to the workload
//                      (device plugin); the path is reported in device-info; IPAM results only.
//   virtio_vdpa-bound: the virtio netdev (virtioN/net/<name>) moves into the pod like a VF netdev.
// The VF is claimed like an SR-IOV VF (lock + allocation record), so a VF's vDPA device is never
// given to two pods. A kernel without the vdpa family fails with a clear kKernelFeature error.
#include "drivers/registry.hpp"
#include "drivers/sriov_vf.hpp"
#include "engine/devinfo/devinfo.hpp"

namespace plumb::drivers {
namespace sriov {
namespace {

/// The vdpa plugin's configuration, validated.
struct VdpaConfig : Config {
  std::string device_id;
  std::optional<uint32_t> mtu_bytes;
};

Result<VdpaConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  VdpaConfig c;
  c.device_id = PLUMB_TRY(device_id(conf, in, "vdpa"));
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, in.network));
  return c;
}

Result<cni::CniResult> add(Context& ctx, const VdpaConfig& c, const cni::CniResult*) {
  DefaultBackends defaults(ctx);
  Backends& b = backends_of(ctx, defaults);
  const std::string& where = ctx.network;
  const std::string& id = c.device_id;
  const std::optional<uint32_t>& mtu = c.mtu_bytes;
  VfDevice dev = PLUMB_TRY(lookup_device(ctx.sysfs_root, id, false, where + ".deviceID"));
  if (b.vdpa == nullptr) return fail(cni_code::kInternal, "vdpa: no device listing backend");
  auto devices = b.vdpa->list();
  if (!devices) return std::unexpected(devices.error().within(where + ": find the vDPA device of " + id));
  auto vd = vdpa::find_by_pci(*devices, id);
  if (!vd) return fail(cni_code::kNotFound, where + ": no vDPA device has PCI device " + id + " as its management device");
  vdpa::Binding bind = PLUMB_TRY(vdpa::read_binding(ctx.sysfs_root, vd->name));
  std::string mode;
  if (bind.driver == "vhost_vdpa") {
    mode = "vhost";
  } else if (bind.driver == "virtio_vdpa") {
    mode = "virtio";
    PLUMB_TRY(ensure_ifname_free(ctx));
  } else {
    return fail(cni_code::kInvalidConfig, where + ": vDPA device " + vd->name + " is bound to " +
                                              (bind.driver.empty() ? std::string("no driver") : bind.driver) +
                                              "; plumb supports vhost_vdpa and virtio_vdpa");
  }

  Claim cl = PLUMB_TRY(claim(ctx, b, "vdpa", dev, mode));
  cni::CniResult r;
  if (mode == "virtio") {
    NetdevOrig orig = PLUMB_TRY(register_return_netdev(ctx, "vdpa", dev.pci, bind.netdev, false, mtu.has_value()));
    link::LinkInfo l = PLUMB_TRY(move_netdev(ctx, orig, std::nullopt, mtu));
    r = PLUMB_TRY(run_ipam(ctx, c.ipam));
    r.interfaces = {{ctx.ifname, l.mac() ? l.mac()->str() : "", l.mtu_bytes, ctx.netns_path, "", dev.pci}};
    for (auto& ip : r.ips) ip.interface = 0;
    PLUMB_TRY(configure_pod_interface(*ctx.pod, l.index, r, false));
  } else {
    r = PLUMB_TRY(run_ipam(ctx, c.ipam));
    r.interfaces = {{ctx.ifname, "", std::nullopt, ctx.netns_path, "", dev.pci}};
    for (auto& ip : r.ips) ip.interface = 0;
  }
  devinfo::VdpaInfo info;
  info.parent_device = vd->name;
  info.driver = mode;
  info.path = bind.vhost_path;
  info.pci_address = dev.pci;
  info.pf_pci_address = dev.pf_pci;
  PLUMB_TRY(complete_device_info(ctx, devinfo::make_vdpa(info)));
  return r;
}

Status check(Context& ctx, const VdpaConfig& c, const cni::CniResult&) { return check_attachment(ctx, c.device_id); }

}  // namespace
}  // namespace sriov

const Driver kVdpa = make_driver<sriov::VdpaConfig, sriov::parse_config, sriov::add, sriov::check>("vdpa");

}  // namespace plumb::drivers
