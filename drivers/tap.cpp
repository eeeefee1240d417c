// The reference "tap" plugin, natively: a persistent TAP device (engine/kernel/tun.hpp) created
// inside the pod namespace under a temporary name, renamed there to the attachment's name with
// its MTU and MAC, optionally made a port of a bridge that lives in the pod namespace (KubeVirt's
// layout), brought up; with an ipam, arp_notify is set and the addresses and routes configured
// (layer 3), without one it is a layer-2 attachment.
// Keys: mac (also CNI_ARGS MAC=, args.cni.mac and the "mac" capability runtimeConfig.mac),
// mtu, multiQueue, owner / group (uid / gid allowed to attach), selinuxContext (the device's
// SELinux label; matched case-insensitively like the reference's Go decoder, so "selinuxcontext"
// works; refused with code 104 on a node without SELinux), bridge (a bridge in the pod
// namespace), ipam.
// Where the reference differs: its netlink path ignores mtu and mac (vishvananda/netlink does not
// apply them to a tuntap) while its `ip tuntap` path applies them; plumb always applies them.
// Flags: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, plus IFF_MULTI_QUEUE with multiQueue (a process
// attaching later must match only the multi-queue flag).
// Result: interfaces [{name, mac, mtu, sandbox}], ips on interface 0. DEL deletes the device.
#include <algorithm>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/tun.hpp"

namespace plumb::drivers {
namespace {

/// The tap plugin's configuration, validated.
struct TapConfig : Config {
  std::optional<Mac> mac;
  std::optional<uint32_t> mtu_bytes;
  bool multi_queue = false;
  std::optional<uint32_t> owner;
  std::optional<uint32_t> group;
  std::string selinux_context;
  std::string bridge;  // "" = no bridge
};

Result<std::optional<uint32_t>> parse_id(const json::Value& conf, std::string_view key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_int(conf, key, where));
  if (!v) return std::optional<uint32_t>{};
  if (*v < 0 || *v > static_cast<int64_t>(UINT32_MAX)) {
    return fail(cni_code::kInvalidConfig, where + "." + std::string(key) + " " + std::to_string(*v) + " is not a uid/gid (0..4294967295)");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*v));
}

Result<TapConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  TapConfig c;
  const std::string& where = in.network;
  c.mac = PLUMB_TRY(requested_mac(conf, in));
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, where));
  c.multi_queue = PLUMB_TRY(json::get_bool(conf, "multiQueue", where)).value_or(false);
  c.owner = PLUMB_TRY(parse_id(conf, "owner", where));
  c.group = PLUMB_TRY(parse_id(conf, "group", where));
  c.selinux_context = PLUMB_TRY(json::get_string(conf, "selinuxContext", where, /*ci=*/true)).value_or("");
  if (auto b = PLUMB_TRY(json::get_string(conf, "bridge", where)); b && !b->empty()) {
    if (!link::valid_ifname(*b)) return fail(cni_code::kInvalidConfig, where + ".bridge \"" + *b + "\" is not a valid interface name");
    c.bridge = *b;
  }
  return c;
}

/// The device under a temporary name in the pod namespace; returns that name.
Result<std::string> create_device(Context& ctx, const TapConfig& c) {
  if (!c.selinux_context.empty() && !tun::selinux_enabled(ctx.sysfs_root)) {
    return fail(cni_code::kKernelFeature, ctx.network + ".selinuxContext \"" + c.selinux_context +
                                              "\": SELinux is not enabled on this node (no " + ctx.sysfs_root +
                                              "/fs/selinux), so the device cannot be labelled");
  }
  for (int attempt = 0;; ++attempt) {
    tun::TapSpec spec{random_ifname("tap"), c.multi_queue, c.owner, c.group};
    auto st = steps::run(ctx, steps::CreatePodTap{spec, c.selinux_context});
    if (st) return spec.name;
    if (st.error().cni_code == cni_code::kConflict && attempt < 4) continue;  // temporary name taken
    return std::unexpected(st.error().within(ctx.network + ": tap " + ctx.ifname + " in " + ctx.netns_path));
  }
}

/// Renames the device to ifname with its MTU and MAC, enslaves it to the bridge, brings it up.
Result<link::LinkInfo> finish_device(Context& ctx, const TapConfig& c, const std::string& tmp) {
  auto tmp_link = PLUMB_TRY(link::get(*ctx.pod, tmp));
  if (!tmp_link) return fail(cni_code::kKernel, "tap " + tmp + " not found in " + ctx.netns_path + " after creation");
  link::LinkChange ch;
  ch.name = ctx.ifname;
  ch.mtu_bytes = c.mtu_bytes;
  ch.mac = c.mac;
  auto st = steps::run(ctx, steps::SetUpPodLink{tmp_link->index, ch});
  if (!st) return std::unexpected(st.error().within(ctx.network + ": rename tap " + tmp + " to " + ctx.ifname));
  link::LinkChange up;
  up.up = true;
  if (!c.bridge.empty()) {
    auto br = PLUMB_TRY(link::get(*ctx.pod, c.bridge));
    if (!br) return fail(cni_code::kInvalidConfig, ctx.network + ".bridge \"" + c.bridge + "\" not found in " + ctx.netns_path);
    up.master_index = br->index;
  }
  st = steps::run(ctx, steps::SetUpPodLink{tmp_link->index, up});
  if (!st) {
    return std::unexpected(st.error().within(ctx.network + ": bring up tap " + ctx.ifname +
                                             (c.bridge.empty() ? std::string() : " as a port of bridge " + c.bridge)));
  }
  auto l = PLUMB_TRY(link::get(*ctx.pod, tmp_link->index));
  if (!l) return fail(cni_code::kKernel, "tap " + ctx.ifname + " vanished after rename");
  return *l;
}

Result<cni::CniResult> tap_add(Context& ctx, const TapConfig& c, const cni::CniResult*) {
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  std::string tmp = PLUMB_TRY(create_device(ctx, c));
  link::LinkInfo tap = PLUMB_TRY(finish_device(ctx, c, tmp));

  cni::CniResult r;
  if (c.ipam.ipam) {
    PLUMB_TRY(enable_arp_notify(ctx, tap.index));
    r = PLUMB_TRY(run_ipam(ctx, c.ipam));
    if (r.ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + ": IPAM plugin returned missing IP config");
    for (auto& ip : r.ips) ip.interface = 0;
    PLUMB_TRY(configure_pod_interface(ctx, tap.index, r, /*dad=*/false));
  }
  r.interfaces.clear();
  r.interfaces.push_back({ctx.ifname, tap.mac() ? tap.mac()->str() : "", tap.mtu_bytes, ctx.netns_path, {}, {}});
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference tap: the config's "dns" replaces the IPAM's
  return r;
}

Status tap_check(Context& ctx, const TapConfig& c, const cni::CniResult& prev) {
  link::LinkInfo tap = PLUMB_TRY(check_pod_interface(ctx, prev, "tun"));
  if (!c.bridge.empty()) {
    auto br = PLUMB_TRY(link::get(*ctx.pod, c.bridge));
    if (!br || tap.master_index != br->index) {
      return fail(cni_code::kKernel, "CHECK: tap " + ctx.ifname + " is not a port of bridge " + c.bridge);
    }
  }
  PLUMB_TRY(check_pod_addresses(ctx, tap.index, prev));
  return check_pod_routes(ctx, prev);
}

}  // namespace

const Driver kTap = make_driver<TapConfig, parse_config, tap_add, tap_check>("tap");

}  // namespace plumb::drivers
