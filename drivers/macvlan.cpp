// The reference "macvlan" plugin, natively: a macvlan on the master (by default the interface of
// the node's default route) born directly in the pod namespace under the attachment's name
// (lower::create_in_pod), arp_notify (and ndisc_notify with IPv6) set, IPAM, addresses
// and routes in the pod.
// Keys: master, mode (bridge | private | vepa | passthru; default bridge), mtu (<= the master's),
// mac (runtimeConfig.mac capability, args.cni.mac, CNI_ARGS MAC=), linkInContainer (the master
// lives in the pod namespace), bcqueuelen (the broadcast/multicast queue length,
// IFLA_MACVLAN_BC_QUEUE_LEN; 0 or absent: the kernel's default; needs Linux >= 5.11, older
// kernels ignore the attribute, so it is read back and a kernel that dropped it fails with 104),
// ipam.
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>

#include "drivers/lower.hpp"
#include "drivers/registry.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::drivers {
namespace {

struct ModeName {
  std::string_view name;
  uint32_t mode;
};
// The modes the reference plugin accepts ("" means bridge).
constexpr std::array<ModeName, 4> kModes = {{
    {"bridge", MACVLAN_MODE_BRIDGE},
    {"private", MACVLAN_MODE_PRIVATE},
    {"vepa", MACVLAN_MODE_VEPA},
    {"passthru", MACVLAN_MODE_PASSTHRU},
}};

/// The macvlan plugin's configuration, validated (nothing here touches the kernel).
struct MacvlanConfig : Config {
  lower::Keys keys;  // master "" = the interface of the default route
  std::string mode_name = "bridge";
  uint32_t mode = MACVLAN_MODE_BRIDGE;
  std::optional<Mac> mac;
  uint32_t bc_queue_len = 0;  // 0: the kernel's default
};

Result<MacvlanConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  MacvlanConfig c;
  const std::string& where = in.network;
  c.keys = PLUMB_TRY(lower::parse_keys(conf, where));
  if (auto v = PLUMB_TRY(json::get_string(conf, "mode", where)); v && !v->empty()) {
    auto it = std::find_if(kModes.begin(), kModes.end(), [&](const ModeName& m) { return m.name == *v; });
    if (it == kModes.end()) {
      return fail(cni_code::kInvalidConfig,
                  where + ".mode \"" + *v + "\" is not a macvlan mode (bridge, private, vepa, passthru)");
    }
    c.mode_name = *v;
    c.mode = it->mode;
  }
  c.mac = PLUMB_TRY(requested_mac(conf, in));
  if (auto q = PLUMB_TRY(json::get_int(conf, "bcqueuelen", where))) {
    if (*q < 0 || *q > static_cast<int64_t>(UINT32_MAX)) {
      return fail(cni_code::kInvalidConfig, where + ".bcqueuelen " + std::to_string(*q) + " is out of range (0..4294967295)");
    }
    c.bc_queue_len = static_cast<uint32_t>(*q);
  }
  return c;
}

Result<cni::CniResult> macvlan_add(Context& ctx, const MacvlanConfig& c, const cni::CniResult*) {
  link::LinkInfo master = PLUMB_TRY(lower::resolve_master(ctx, c.keys, c.keys.master));
  // Born in the pod namespace under its final name; the IPAM's release announced with it.
  const bool release_registered = ipam_release_ahead(ctx, c.ipam);
  link::MacvlanSpec spec;
  spec.name = ctx.ifname;
  spec.master_index = master.index;
  spec.mode = c.mode;
  spec.mtu_bytes = c.keys.mtu_bytes.value_or(0);
  spec.mac = c.mac;
  spec.netns_fd = c.keys.link_in_container ? -1 : ctx.pod_ns->fd();
  spec.bc_queue_len = c.bc_queue_len;
  spec.group = link::kPodLinkGroup;
  link::LinkInfo pod_link = PLUMB_TRY(
      lower::create_in_pod(ctx, "create macvlan (mode " + c.mode_name + ") on master " + master.name, c.keys, spec));
  if (c.bc_queue_len != 0 && pod_link.macvlan_bc_queue_len != c.bc_queue_len) {
    return fail(cni_code::kKernelFeature, ctx.network + ".bcqueuelen " + std::to_string(c.bc_queue_len) +
                                              ": this kernel does not support the macvlan broadcast queue length "
                                              "(IFLA_MACVLAN_BC_QUEUE_LEN, Linux >= 5.11)");
  }

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam, release_registered));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference macvlan: the config's "dns" replaces the IPAM's
  // Neighbours learn the new MAC when the link comes up (the reference sets these too).
  PLUMB_TRY(lower::notify_neighbours(ctx, r));
  PLUMB_TRY(finish_pod_interface(ctx, pod_link, r, /*arp_notify=*/true));
  lower::announce(ctx, pod_link, r);
  return r;
}

Status macvlan_check(Context& ctx, const MacvlanConfig& c, const cni::CniResult& prev) {
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "macvlan"));
  if (c.keys.mtu_bytes && pod_link.mtu_bytes != *c.keys.mtu_bytes) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MTU " + std::to_string(pod_link.mtu_bytes) + ", expected " +
                                       std::to_string(*c.keys.mtu_bytes));
  }
  if (c.bc_queue_len != 0 && pod_link.macvlan_bc_queue_len != c.bc_queue_len) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has no broadcast queue length " + std::to_string(c.bc_queue_len));
  }
  return check_pod_addresses(ctx, pod_link.index, prev);
}

}  // namespace

const Driver kMacvlan = make_driver<MacvlanConfig, parse_config, macvlan_add, macvlan_check>("macvlan");

}  // namespace plumb::drivers
