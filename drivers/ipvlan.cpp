// The reference "ipvlan" plugin, natively: an ipvlan on the master (by default the interface of
// the node's default route; chained after a plugin whose result has exactly one interface, that
// interface) born directly in the pod namespace under the attachment's name
// (lower::create_in_pod), arp_notify (and ndisc_notify with IPv6) set, addresses and routes in
// the pod.
// Keys: master, mode (l2 | l3 | l3s; default l2), mtu (<= the master's), linkInContainer (the
// master lives in the pod namespace), ipam (without one, the previous result's IPs are used, as
// the reference does in a chain). An ipvlan shares its master's MAC: there is no "mac" key.
// A kernel without ipvlan (CONFIG_IPVLAN) fails the ADD with kKernelFeature naming it.
#include <linux/if_link.h>

#include <algorithm>
#include <array>

#include "drivers/lower.hpp"
#include "drivers/registry.hpp"

namespace plumb::drivers {
namespace {

struct ModeName {
  std::string_view name;
  uint16_t mode;
};
// The modes the reference plugin accepts ("" means l2).
constexpr std::array<ModeName, 3> kModes = {{{"l2", IPVLAN_MODE_L2}, {"l3", IPVLAN_MODE_L3}, {"l3s", IPVLAN_MODE_L3S}}};

/// The ipvlan plugin's configuration, validated.
struct IpvlanConfig : Config {
  lower::Keys keys;  // master "" = the previous result's only interface, else the default route's
  std::string mode_name = "l2";
  uint16_t mode = IPVLAN_MODE_L2;
};

Result<IpvlanConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  IpvlanConfig c;
  const std::string& where = in.network;
  c.keys = PLUMB_TRY(lower::parse_keys(conf, where));
  if (auto v = PLUMB_TRY(json::get_string(conf, "mode", where)); v && !v->empty()) {
    auto it = std::find_if(kModes.begin(), kModes.end(), [&](const ModeName& m) { return m.name == *v; });
    if (it == kModes.end()) {
      return fail(cni_code::kInvalidConfig, where + ".mode: unknown ipvlan mode \"" + *v + "\" (l2, l3, l3s)");
    }
    c.mode_name = *v;
    c.mode = it->mode;
  }
  return c;
}

/// The master's name as the reference resolves it: the key, else (chained) the previous
/// result's only interface, else "" (the default route's interface).
Result<std::string> master_name(const IpvlanConfig& c, const cni::CniResult* prev, const std::string& network) {
  if (!c.keys.master.empty() || prev == nullptr) return c.keys.master;
  if (prev->interfaces.size() == 1 && !prev->interfaces[0].name.empty()) return prev->interfaces[0].name;
  return fail(cni_code::kInvalidConfig, network + ": no \"master\" given and the previous result lacks a single named "
                                                  "interface to take it from (chained master failure)");
}

Result<cni::CniResult> ipvlan_add(Context& ctx, const IpvlanConfig& c, const cni::CniResult* prev) {
  const std::string name = PLUMB_TRY(master_name(c, prev, ctx.network));
  link::LinkInfo master = PLUMB_TRY(lower::resolve_master(ctx, c.keys, name));
  const bool use_prev_ips = !c.ipam.ipam && prev != nullptr && !prev->ips.empty();
  if (!c.ipam.ipam && !use_prev_ips) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": ipvlan needs addresses: an \"ipam\", or a previous result with IPs");
  }
  const bool release_registered = !use_prev_ips && ipam_release_ahead(ctx, c.ipam);  // announced with the link
  link::IpvlanSpec spec{ctx.ifname,
                        master.index,
                        c.mode,
                        c.keys.mtu_bytes.value_or(0),
                        c.keys.link_in_container ? -1 : ctx.pod_ns->fd(),
                        link::kPodLinkGroup};
  auto created =
      lower::create_in_pod(ctx, "create ipvlan (mode " + c.mode_name + ") on master " + master.name, c.keys, spec);
  if (!created && created.error().cni_code == cni_code::kKernelFeature) {
    return fail(cni_code::kKernelFeature, ctx.network + ": this kernel has no ipvlan support (CONFIG_IPVLAN, module ipvlan)",
                created.error().text());
  }
  link::LinkInfo pod_link = PLUMB_TRY(std::move(created));

  cni::CniResult r = use_prev_ips ? *prev : PLUMB_TRY(run_ipam(ctx, c.ipam, release_registered));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference ipvlan: the config's "dns" replaces the IPAM's
  if (r.ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + ": IPAM plugin returned missing IP config");
  PLUMB_TRY(lower::notify_neighbours(ctx, r));
  PLUMB_TRY(finish_pod_interface(ctx, pod_link, r, /*arp_notify=*/true));
  lower::announce(ctx, pod_link, r);
  return r;
}

Status ipvlan_check(Context& ctx, const IpvlanConfig& c, const cni::CniResult& prev) {
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "ipvlan"));
  if (pod_link.ipvlan_mode != c.mode) {
    auto it = std::find_if(kModes.begin(), kModes.end(), [&](const ModeName& m) { return m.mode == pod_link.ipvlan_mode; });
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is an ipvlan in mode " +
                                       (it == kModes.end() ? std::string("?") : std::string(it->name)) + ", expected " + c.mode_name);
  }
  if (!c.keys.master.empty()) PLUMB_TRY(lower::resolve_master(ctx, c.keys, c.keys.master));
  PLUMB_TRY(check_pod_routes(ctx, prev));
  return check_pod_addresses(ctx, pod_link.index, prev);
}

}  // namespace

const Driver kIpvlan = make_driver<IpvlanConfig, parse_config, ipvlan_add, ipvlan_check>("ipvlan");

}  // namespace plumb::drivers
