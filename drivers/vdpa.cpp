// vDPA attachments: the vDPA device named by `vdpaDevice` (its name on the vdpa bus, as `vdpa dev
// show` lists it: a device whose management device is no VF, such as VDUSE's), or the one whose
// management device is the VF `deviceID` (or runtimeConfig.deviceID), found through the "vdpa"
// generic netlink family (VDPA_CMD_DEV_GET dump, in the initial network namespace only: the
// family is not namespace-aware). Either way its driver and endpoints come from sysfs
// (/sys/bus/vdpa/devices/<name>). Keys: vdpaDevice, deviceID, mtu, ipam.
//   vhost_vdpa-bound:  nothing moves; the pod's runtime hands /dev/vhost-vdpa-N to the workload
//                      (device plugin); the path is reported in device-info; IPAM results only.
//   virtio_vdpa-bound: the virtio netdev (virtioN/net/<name>) moves into the pod like a VF netdev.
// The device is claimed like an SR-IOV VF (lock + allocation record; a named device's record is
// "vdpa:<name>"), so it is never given to two pods. A kernel without the vdpa family fails with a
// clear kKernelFeature error. The VF steps shared with sriov and ib-sriov are
// drivers/vf_attach.hpp's.
#include "drivers/registry.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/vdpa.hpp"

namespace plumb::drivers {
namespace {

/// The vdpa plugin's configuration, validated: exactly one of vdpa_device and device_id is set.
struct VdpaConfig : Config {
  std::string vdpa_device;  // "vdpaDevice": the vDPA device's name on the vdpa bus
  std::string device_id;    // the VF whose vDPA device to use
  std::optional<uint32_t> mtu_bytes;
};

/// The allocation record's key of a named vDPA device (a VF's is its PCI address).
std::string named_key(const std::string& name) { return "vdpa:" + name; }

/// True when the config or its runtimeConfig carries a non-empty deviceID.
Result<bool> has_device_id(const json::Value& conf, const std::string& where) {
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto id = PLUMB_TRY(json::get_string(*rc, "deviceID", where + ".runtimeConfig", true)); id && !id->empty())
      return true;
  }
  auto id = PLUMB_TRY(json::get_string(conf, "deviceID", where));
  return id && !id->empty();
}

Result<VdpaConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  VdpaConfig c;
  const std::string& where = in.network;
  if (auto named = PLUMB_TRY(json::get_string(conf, "vdpaDevice", where))) {
    if (!vdpa::valid_device_name(*named)) {
      return fail(
          cni_code::kInvalidConfig,
          where + ".vdpaDevice \"" + *named + "\" is not a vDPA device name (1-64 characters of A-Z a-z 0-9 . _ : -)");
    }
    if (PLUMB_TRY(has_device_id(conf, where))) {
      return fail(cni_code::kInvalidConfig,
                  where +
                      ": set either vdpaDevice (the vDPA device) or a deviceID (the VF whose vDPA device to use, "
                      "also from the NAD's resourceName), not both");
    }
    c.vdpa_device = *named;
  } else {
    c.device_id = PLUMB_TRY(vf_attach::device_id(conf, in, "vdpa"));
  }
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

/// The device an ADD attaches: `dev` is the VF (its pci the allocation key: "vdpa:<name>" and
/// nothing else for a named device), `name` the vDPA device, `bind` its sysfs binding.
struct Target {
  pci::VfDevice dev;
  std::string name;
  vdpa::Binding bind;
};

Result<Target> locate(Context& ctx, vf_attach::Backends& b, const VdpaConfig& c) {
  const std::string& where = ctx.network;
  Target t;
  if (!c.vdpa_device.empty()) {
    t.name = c.vdpa_device;
    t.dev.pci = named_key(t.name);
    auto bind = vdpa::read_binding(ctx.sysfs_root, t.name);
    if (!bind && bind.error().cni_code == cni_code::kNotFound) {
      return fail(cni_code::kNotFound, where + ".vdpaDevice \"" + t.name + "\": no such vDPA device on the vdpa bus (" +
                                           bind.error().msg + ")");
    }
    t.bind = PLUMB_TRY(std::move(bind));
    return t;
  }
  t.dev = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, c.device_id, false, where + ".deviceID"));
  t.name = PLUMB_TRY(find_device(ctx, b, c.device_id)).name;
  t.bind = PLUMB_TRY(vdpa::read_binding(ctx.sysfs_root, t.name));
  return t;
}

Result<cni::CniResult> vdpa_add(Context& ctx, const VdpaConfig& c, const cni::CniResult*) {
  vf_attach::DefaultBackends defaults(ctx);
  vf_attach::Backends& b = vf_attach::backends_of(defaults);
  const std::string& where = ctx.network;
  Target t = PLUMB_TRY(locate(ctx, b, c));
  const pci::VfDevice& dev = t.dev;
  const vdpa::Binding& bind = t.bind;
  const std::string pci = c.vdpa_device.empty() ? dev.pci : "";  // a named device has no VF
  std::string mode;
  if (bind.driver == "vhost_vdpa") {
    mode = "vhost";
  } else if (bind.driver == "virtio_vdpa") {
    mode = "virtio";
    PLUMB_TRY(vf_attach::ensure_ifname_free(ctx));
  } else {
    return fail(cni_code::kInvalidConfig, where + ": vDPA device " + t.name + " is bound to " +
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
  cni::CniResult r = PLUMB_TRY(vf_attach::pod_result(ctx, c.ipam, pci, moved ? &*moved : nullptr, ""));
  devinfo::VdpaInfo info;
  info.parent_device = t.name;
  info.driver = mode;
  info.path = bind.vhost_path;
  info.pci_address = pci;
  info.pf_pci_address = dev.pf_pci;
  PLUMB_TRY(vf_attach::complete_device_info(ctx, devinfo::make_vdpa(info)));
  return r;
}

Status vdpa_check(Context& ctx, const VdpaConfig& c, const cni::CniResult&) {
  return vf_attach::check_attachment(ctx, c.vdpa_device.empty() ? c.device_id : named_key(c.vdpa_device));
}

}  // namespace

const Driver kVdpa = make_driver<VdpaConfig, parse_config, vdpa_add, vdpa_check>("vdpa");

}  // namespace plumb::drivers
