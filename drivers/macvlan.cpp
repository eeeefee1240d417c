// The reference "macvlan" plugin, natively: a macvlan on the master (by default the interface of
// the node's default route) born directly in the pod namespace under a temporary name, renamed
// there to the attachment's name, arp_notify (and ndisc_notify with IPv6) set, IPAM, addresses
// and routes in the pod.
// Keys: master, mode (bridge | private | vepa | passthru; default bridge), mtu (<= the master's),
// mac (runtimeConfig.mac capability, args.cni.mac, CNI_ARGS MAC=), linkInContainer (the master
// lives in the pod namespace), ipam.
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>

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
  std::string master;  // "" = the interface of the default route
  std::string mode_name = "bridge";
  uint32_t mode = MACVLAN_MODE_BRIDGE;
  std::optional<uint32_t> mtu_bytes;
  std::optional<Mac> mac;
  bool link_in_container = false;
};

Result<MacvlanConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  MacvlanConfig c;
  const std::string& where = in.network;
  if (auto v = PLUMB_TRY(json::get_string(conf, "master", where))) {
    if (!v->empty() && !link::valid_ifname(*v)) {
      return fail(cni_code::kInvalidConfig, where + ".master \"" + *v + "\" is not a valid interface name");
    }
    c.master = *v;
  }
  if (auto v = PLUMB_TRY(json::get_string(conf, "mode", where)); v && !v->empty()) {
    auto it = std::find_if(kModes.begin(), kModes.end(), [&](const ModeName& m) { return m.name == *v; });
    if (it == kModes.end()) {
      return fail(cni_code::kInvalidConfig,
                  where + ".mode \"" + *v + "\" is not a macvlan mode (bridge, private, vepa, passthru)");
    }
    c.mode_name = *v;
    c.mode = it->mode;
  }
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, in.network));
  c.link_in_container = PLUMB_TRY(json::get_bool(conf, "linkInContainer", where)).value_or(false);
  c.mac = PLUMB_TRY(requested_mac(conf, in));
  return c;
}

/// The master: the named link, or the link of the default route (IPv4 first, then IPv6) of the
/// namespace `nl` is bound to.
Result<link::LinkInfo> find_master(netlink::Socket& nl, const MacvlanConfig& c, const std::string& where_ns,
                                   const std::string& network) {
  std::string name = c.master;
  if (name.empty()) {
    int oif = 0;
    for (int family : {AF_INET, AF_INET6}) {
      auto routes = PLUMB_TRY(route::list(nl, family));
      for (auto& r : routes) {
        if (r.is_default() && r.oif > 0) {
          oif = r.oif;
          break;
        }
      }
      if (oif != 0) break;
    }
    if (oif == 0) {
      return fail(cni_code::kInvalidConfig, network + ": no \"master\" given and " + where_ns +
                                                " has no default route to take it from");
    }
    auto l = PLUMB_TRY(link::get(nl, oif));
    if (!l) return fail(cni_code::kKernel, network + ": the default route's interface (index " + std::to_string(oif) + ") vanished");
    return *l;
  }
  auto l = PLUMB_TRY(link::get(nl, name));
  if (!l) return fail(cni_code::kInvalidConfig, network + ".master \"" + name + "\" not found in " + where_ns);
  return *l;
}

/// Writes a per-interface sysctl inside the pod namespace.
Status pod_sysctl(const Context& ctx, const std::string& key, const std::string& value) {
  auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
  return sysctl::write(key, value);
}

Result<cni::CniResult> macvlan_add(Context& ctx, const MacvlanConfig& c, const cni::CniResult*) {
  netlink::Socket& lower_nl = c.link_in_container ? *ctx.pod : *ctx.node;
  const std::string lower_where = c.link_in_container ? "the pod namespace " + ctx.netns_path : std::string("the node namespace");
  link::LinkInfo master = PLUMB_TRY(find_master(lower_nl, c, lower_where, ctx.network));
  if (c.mtu_bytes && *c.mtu_bytes > master.mtu_bytes) {
    return fail(cni_code::kInvalidConfig, ctx.network + ".mtu " + std::to_string(*c.mtu_bytes) + " is above the MTU " +
                                              std::to_string(master.mtu_bytes) + " of master " + master.name);
  }
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }

  // Born in the pod namespace under a temporary name, then renamed there.
  std::string tmp;
  for (int attempt = 0;; ++attempt) {
    tmp = random_ifname("mvl");
    PLUMB_TRY(undo::will(ctx, undo::LinkDel{"pod", tmp}));
    link::MacvlanSpec spec;
    spec.name = tmp;
    spec.master_index = master.index;
    spec.mode = c.mode;
    spec.mtu_bytes = c.mtu_bytes.value_or(0);
    spec.mac = c.mac;
    spec.netns_fd = c.link_in_container ? -1 : ctx.pod_ns->fd();
    auto st = link::create_macvlan(lower_nl, spec);
    if (st) break;
    if (st.error().sys_errno == EEXIST && attempt < 4) continue;  // temporary name taken: another one
    return std::unexpected(st.error().within(ctx.network + ": create macvlan (mode " + c.mode_name + ") on master " +
                                             master.name + " for " + ctx.ifname));
  }
  auto tmp_link = PLUMB_TRY(link::get(*ctx.pod, tmp));
  if (!tmp_link) return fail(cni_code::kKernel, "macvlan " + tmp + " not found in " + ctx.netns_path + " after creation");
  PLUMB_TRY(undo::will(ctx, undo::LinkDel{"pod", ctx.ifname}));
  link::LinkChange rename;
  rename.name = ctx.ifname;
  PLUMB_TRY(link::modify(*ctx.pod, tmp_link->index, rename));
  auto pod_link = PLUMB_TRY(link::get(*ctx.pod, tmp_link->index));
  if (!pod_link) return fail(cni_code::kKernel, "macvlan " + ctx.ifname + " vanished after rename");

  // Neighbours learn the new MAC when the link comes up (the reference sets these too).
  PLUMB_TRY(pod_sysctl(ctx, "net/ipv4/conf/" + ctx.ifname + "/arp_notify", "1"));

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference macvlan/host-device: the config's "dns" replaces the IPAM's
  bool v6 = std::any_of(r.ips.begin(), r.ips.end(), [](const cni::IpConfig& ip) { return !ip.address.addr.is_v4(); });
  if (v6) PLUMB_TRY(pod_sysctl(ctx, "net/ipv6/conf/" + ctx.ifname + "/ndisc_notify", "1"));
  r.interfaces.clear();
  r.interfaces.push_back({ctx.ifname, pod_link->mac() ? pod_link->mac()->str() : "", pod_link->mtu_bytes, ctx.netns_path, {}, {}});
  for (auto& ip : r.ips) ip.interface = 0;
  PLUMB_TRY(configure_pod_interface(*ctx.pod, pod_link->index, r, /*dad=*/true));
  return r;
}

Status macvlan_check(Context& ctx, const MacvlanConfig& c, const cni::CniResult& prev) {
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "macvlan"));
  if (c.mtu_bytes && pod_link.mtu_bytes != *c.mtu_bytes) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MTU " + std::to_string(pod_link.mtu_bytes) + ", expected " +
                                       std::to_string(*c.mtu_bytes));
  }
  return check_pod_addresses(ctx, pod_link.index, prev);
}

}  // namespace

const Driver kMacvlan = make_driver<MacvlanConfig, parse_config, macvlan_add, macvlan_check>("macvlan");

}  // namespace plumb::drivers
