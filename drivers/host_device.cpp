// The reference "host-device" plugin, natively: an existing node netdev is moved into the pod
// namespace under the attachment's name (one RTM_NEWLINK: IFLA_NET_NS_FD + IFLA_IFNAME), IPAM
// configures it, and DEL ("host-device.restore") returns it to the node namespace with its
// original name, MTU and MAC, down.
// Keys: exactly one of device (name), hwaddr (MAC), kernelpath (/sys/devices/... directory of the
// device), pciBusID ("0000:04:00.5"), or runtimeConfig.deviceID (capability "deviceID"; replaces
// pciBusID as in the reference plugin: a PCI address when /sys/bus/pci/devices/<id> exists, else
// an auxiliary-bus device /sys/bus/auxiliary/devices/<id>, e.g. an SF "mlx5_core.sf.2", whose
// net/ entry is moved); ipam.
// sysfs lookups (kernelpath, pciBusID, deviceID) read under Context::sysfs_root (plumb config
// sysfsRoot). A PCI device without net/ entry may be a virtio device: <pci>/virtio*/net is used.
// Userspace (DPDK) mode, as the reference: a PCI device bound to vfio-pci, uio_pci_generic or
// igb_uio has no netdev; nothing is moved, IPAM still runs and its addresses are reported (not
// configured), the result's interface is {name: ifname, sandbox, pciID}, CHECK passes.
// device-info: with a CNIDeviceInfoFile, a PCI device's pci-address is completed into it
// (engine/devinfo; the device plugin's values win); the reference writes none.
//
// When the pod namespace is destroyed before DEL the kernel hands a physical device back to the
// initial namespace (keeping its ifindex when free, and its current name unless taken, else
// "dev%d"); virtual devices (veth stand-ins) are destroyed with the namespace instead. The undo
// operation finds the device in the node namespace by its recorded ifindex and restores it, and
// treats a device that is nowhere as already gone.
#include <net/if.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/file.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/pci.hpp"

namespace plumb::drivers {
namespace {

/// The selector of the device to move; exactly one is set.
struct HostDeviceConfig : Config {
  std::string device;
  std::optional<Mac> hwaddr;
  std::string kernelpath;
  std::string pci_bus_id;  // pciBusID
  std::string device_id;   // runtimeConfig.deviceID: a PCI or auxiliary-bus device, resolved in sysfs at ADD
  std::string selector;    // "device \"eth1\"" etc., for messages
};

/// A PCI address or other sysfs directory name: no separators, not "." or "..".
bool safe_component(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 64) return false;
  return std::none_of(s.begin(), s.end(), [](char ch) { return ch == '/' || ch == '\0' || ch == ' ' || ch == '\n'; });
}

/// An absolute path under /sys/devices/ without "." or ".." components.
bool safe_kernelpath(const std::string& p) {
  constexpr std::string_view kPrefix = "/sys/devices/";
  if (p.rfind(kPrefix, 0) != 0 || p.size() == kPrefix.size()) return false;
  size_t start = 1;
  while (start < p.size()) {
    size_t end = p.find('/', start);
    std::string comp = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (comp == "." || comp == ".." || comp.find('\0') != std::string::npos) return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

Result<HostDeviceConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  HostDeviceConfig c;
  const std::string& where = in.network;
  int selectors = 0;
  if (auto v = PLUMB_TRY(json::get_string(conf, "device", where)); v && !v->empty()) {
    if (!link::valid_ifname(*v)) return fail(cni_code::kInvalidConfig, where + ".device \"" + *v + "\" is not a valid interface name");
    c.device = *v;
    c.selector = "device \"" + *v + "\"";
    ++selectors;
  }
  if (auto v = PLUMB_TRY(json::get_string(conf, "hwaddr", where)); v && !v->empty()) {
    auto m = Mac::parse(*v);
    if (!m) return fail(cni_code::kInvalidConfig, where + ".hwaddr \"" + *v + "\" is not a valid MAC address");
    c.hwaddr = *m;
    c.selector = "hwaddr " + m->str();
    ++selectors;
  }
  if (auto v = PLUMB_TRY(json::get_string(conf, "kernelpath", where)); v && !v->empty()) {
    if (!safe_kernelpath(*v)) {
      return fail(cni_code::kInvalidConfig, where + ".kernelpath \"" + *v + "\" must be an absolute path under /sys/devices/");
    }
    c.kernelpath = *v;
    c.selector = "kernelpath \"" + *v + "\"";
    ++selectors;
  }
  auto pci = PLUMB_TRY(json::get_string(conf, "pciBusID", where));
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto id = PLUMB_TRY(json::get_string(*rc, "deviceID", where + ".runtimeConfig", true)); id && !id->empty()) {
      if (!safe_component(*id)) return fail(cni_code::kInvalidConfig, where + ".runtimeConfig.deviceID \"" + *id + "\" is not a device name");
      pci.reset();  // the standardized deviceID overrides pciBusID (reference plugin)
      c.device_id = *id;
      c.selector = "runtimeConfig.deviceID \"" + *id + "\"";
      ++selectors;
    }
  }
  if (pci && !pci->empty()) {
    if (!safe_component(*pci)) return fail(cni_code::kInvalidConfig, where + ".pciBusID \"" + *pci + "\" is not a PCI address");
    c.pci_bus_id = *pci;
    c.selector = "pciBusID \"" + *pci + "\"";
    ++selectors;
  }
  if (selectors != 1) {
    return fail(cni_code::kInvalidConfig,
                where + ": host-device needs exactly one of \"device\", \"hwaddr\", \"kernelpath\", \"pciBusID\" "
                        "(or runtimeConfig.deviceID), got " + std::to_string(selectors));
  }
  return c;
}

/// Entries of a directory (without "." and ".."), sorted; none when it does not exist.
Result<std::vector<std::string>> sorted_entries(const std::string& dir) {
  auto out = PLUMB_TRY(plumb::list_dir(dir));
  std::sort(out.begin(), out.end());
  return out;
}

/// The first entry of `net_dir` that is a link of the node namespace.
Result<link::LinkInfo> link_of_net_dir(Context& ctx, const std::string& device_dir, const std::string& net_dir,
                                       const HostDeviceConfig& c) {
  struct stat st {};
  if (::stat(device_dir.c_str(), &st) != 0) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": " + c.selector + ": no device at " + device_dir);
  }
  auto names = sorted_entries(net_dir);
  if (!names || names->empty()) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": " + c.selector + ": device " + device_dir +
                                              " has no network interface (no " + net_dir + " entry)");
  }
  for (auto& n : *names) {
    if (!link::valid_ifname(n)) continue;
    if (auto l = PLUMB_TRY(link::get(*ctx.node, n))) return *l;
  }
  return fail(cni_code::kInvalidConfig, ctx.network + ": " + c.selector + ": none of the interfaces of " + net_dir +
                                            " is in the node namespace");
}

/// The device to hand over: its netdev, or none for a PCI device in userspace (DPDK) mode.
struct Found {
  std::optional<link::LinkInfo> dev;  ///< nullopt: userspace driver, nothing to move
  std::string pci;                    ///< its PCI address when selected by one
  std::string driver;                 ///< the PCI device's driver
};

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// A PCI device: userspace mode when bound to a DPDK driver, else its net/ (or virtio*/net) entry.
Result<Found> find_pci(Context& ctx, const HostDeviceConfig& c, const std::string& pci) {
  auto d = pci::lookup_device(ctx.sysfs_root, pci, /*require_vf=*/false, ctx.network + ": " + c.selector);
  if (!d) return std::unexpected(d.error());
  Found f;
  f.pci = pci;
  f.driver = d->driver;
  if (d->userspace()) return f;
  const std::string dir = ctx.sysfs_root + "/bus/pci/devices/" + pci;
  std::string net_dir = dir + "/net";
  if (!is_dir(net_dir)) {
    for (auto& e : PLUMB_TRY(sorted_entries(dir))) {
      if (e.rfind("virtio", 0) == 0 && is_dir(dir + "/" + e + "/net")) {
        net_dir = dir + "/" + e + "/net";
        break;
      }
    }
  }
  f.dev = PLUMB_TRY(link_of_net_dir(ctx, dir, net_dir, c));
  return f;
}

Result<Found> find_device(Context& ctx, const HostDeviceConfig& c) {
  if (!c.device.empty()) {
    auto l = PLUMB_TRY(link::get(*ctx.node, c.device));
    if (!l) return fail(cni_code::kInvalidConfig, ctx.network + ".device \"" + c.device + "\" not found in the node namespace");
    return Found{*l, {}, {}};
  }
  if (c.hwaddr) {
    auto links = PLUMB_TRY(link::list(*ctx.node));
    for (auto& l : links) {
      if (l.mac() && *l.mac() == *c.hwaddr) return Found{l, {}, {}};
    }
    return fail(cni_code::kInvalidConfig, ctx.network + ".hwaddr " + c.hwaddr->str() + ": no interface with this MAC in the node namespace");
  }
  if (!c.kernelpath.empty()) {
    // "/sys/devices/..." read under the configured sysfs root.
    const std::string dir = ctx.sysfs_root + c.kernelpath.substr(4);
    return Found{PLUMB_TRY(link_of_net_dir(ctx, dir, dir + "/net", c)), {}, {}};
  }
  if (!c.pci_bus_id.empty()) return find_pci(ctx, c, c.pci_bus_id);
  // runtimeConfig.deviceID: a PCI device if sysfs has one of that name, else an auxiliary device.
  if (is_dir(ctx.sysfs_root + "/bus/pci/devices/" + c.device_id)) return find_pci(ctx, c, c.device_id);
  const std::string aux = ctx.sysfs_root + "/bus/auxiliary/devices/" + c.device_id;
  if (is_dir(aux)) return Found{PLUMB_TRY(link_of_net_dir(ctx, aux, aux + "/net", c)), {}, {}};
  return fail(cni_code::kInvalidConfig, ctx.network + ": runtime config DeviceID " + c.device_id +
                                            " not found or unsupported (neither a PCI nor an auxiliary-bus device in " +
                                            ctx.sysfs_root + "/bus)");
}

/// Moves the netdev into the pod under ifname (its restore recorded first).
Result<link::LinkInfo> move_in(Context& ctx, const HostDeviceConfig& c, const link::LinkInfo& dev) {
  if (dev.index == 1 || (dev.flags & IFF_LOOPBACK)) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": " + c.selector + " selects the loopback device " + dev.name);
  }
  auto st = steps::run(ctx, steps::MoveLinkIntoPod{dev, ctx.ifname});
  if (!st) return std::unexpected(st.error().within(ctx.network + ": move " + dev.name + " into " + ctx.netns_path + " as " + ctx.ifname));
  auto pod_link = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!pod_link) return fail(cni_code::kKernel, ctx.ifname + " not found in " + ctx.netns_path + " after moving " + dev.name);
  return *pod_link;
}

Result<cni::CniResult> host_device_add(Context& ctx, const HostDeviceConfig& c, const cni::CniResult*) {
  Found found = PLUMB_TRY(find_device(ctx, c));
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  std::optional<link::LinkInfo> pod_link;
  if (found.dev) pod_link = PLUMB_TRY(move_in(ctx, c, *found.dev));

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference macvlan/host-device: the config's "dns" replaces the IPAM's
  r.interfaces.clear();
  cni::Interface iface{ctx.ifname, "", std::nullopt, ctx.netns_path, {}, {}};
  if (pod_link) {
    iface.mac = pod_link->mac() ? pod_link->mac()->str() : "";
    iface.mtu_bytes = pod_link->mtu_bytes;
  }
  if (!found.pci.empty()) iface.pci_id = found.pci;
  r.interfaces.push_back(std::move(iface));
  for (auto& ip : r.ips) ip.interface = 0;
  if (pod_link) PLUMB_TRY(configure_pod_interface(ctx, pod_link->index, r, /*dad=*/true));
  if (!found.pci.empty() && !ctx.device_info_file.empty()) {
    devinfo::PciInfo info;
    info.pci_address = found.pci;
    PLUMB_TRY(devinfo::complete(ctx.device_info_file, devinfo::make_pci(info)));
  }
  return r;
}

Status host_device_check(Context& ctx, const HostDeviceConfig& c, const cni::CniResult& prev) {
  if (!c.pci_bus_id.empty() || !c.device_id.empty()) {
    // A device in userspace (DPDK) mode has nothing in the pod to check (the reference's CHECK).
    auto pci = !c.pci_bus_id.empty() ? c.pci_bus_id : c.device_id;
    if (is_dir(ctx.sysfs_root + "/bus/pci/devices/" + pci)) {
      auto d = pci::lookup_device(ctx.sysfs_root, pci, false, "CHECK: " + c.selector);
      if (d && d->userspace()) return {};
    }
  }
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, ""));
  return check_pod_addresses(ctx, pod_link.index, prev);
}

/// "dev<N>": the name the kernel gives a device returned to the initial namespace when its own
/// name is taken there.
bool kernel_fallback_name(const std::string& n) {
  return n.size() > 3 && n.rfind("dev", 0) == 0 && std::all_of(n.begin() + 3, n.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// The attributes to put back on a device that is in the node namespace.
link::LinkChange restore_change(const link::LinkInfo& l, const std::string& name, uint32_t mtu, const std::optional<Mac>& mac) {
  link::LinkChange ch;
  if (l.name != name) ch.name = name;
  if (mtu != 0 && l.mtu_bytes != mtu) ch.mtu_bytes = mtu;
  if (mac && l.mac() && *l.mac() != *mac) ch.mac = mac;
  return ch;
}

bool empty_change(const link::LinkChange& ch) { return !ch.name && !ch.mtu_bytes && !ch.mac; }

}  // namespace

const Driver kHostDevice = make_driver<HostDeviceConfig, parse_config, host_device_add, host_device_check>("host-device");

namespace undo {

Status run_op(Context& ctx, const HostDeviceRestore& op) {
  const std::optional<Mac>& mac = op.mac;
  uint32_t mtu_bytes = op.mtu_bytes;
  const std::string what = "return " + op.ifname + " to the node namespace as " + op.name;

  if (ctx.pod != nullptr) {
    auto l = PLUMB_TRY(link::get(*ctx.pod, op.ifname));
    if (l) {
      // Down first (some drivers refuse a MAC change while up; a device is renamed only when
      // down), MTU and MAC back, then out under its original name in one message.
      link::LinkChange down;
      down.up = false;
      auto st = link::modify(*ctx.pod, l->index, down);
      if (!st) return std::unexpected(st.error().within("undo: " + what + ": set down"));
      link::LinkChange ch = restore_change(*l, l->name, mtu_bytes, mac);
      if (!empty_change(ch)) {
        st = link::modify(*ctx.pod, l->index, ch);
        if (!st) return std::unexpected(st.error().within("undo: " + what + ": restore MTU/MAC"));
      }
      auto node_ns = PLUMB_TRY(netns::Netns::current());
      link::LinkChange out;
      out.netns_fd = node_ns.fd();
      out.name = op.name;
      st = link::modify(*ctx.pod, l->index, out);
      if (!st) return std::unexpected(st.error().within("undo: " + what));
      return {};
    }
  }
  // Not in the pod: never moved (a rollback before the move), returned to the node by the kernel
  // when the pod namespace died, or destroyed with it (virtual devices).
  auto l = PLUMB_TRY(link::get(*ctx.node, op.index));
  if (!l) return {};
  bool ours = l->name == op.name || l->name == op.ifname || kernel_fallback_name(l->name) || (mac && l->mac() && *l->mac() == *mac);
  if (!ours) return {};  // the index now belongs to another device
  link::LinkChange ch = restore_change(*l, op.name, mtu_bytes, mac);
  if (empty_change(ch)) return {};  // as it was before the ADD (never moved): leave it alone
  if (l->up()) {
    link::LinkChange down;
    down.up = false;
    PLUMB_TRY(link::modify(*ctx.node, l->index, down));
  }
  auto st = link::modify(*ctx.node, l->index, ch);
  if (!st) return std::unexpected(st.error().within("undo: restore " + l->name + " as " + op.name + " in the node namespace"));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
