// Steps macvlan, ipvlan and vlan share (drivers/lower.hpp).
#include "drivers/lower.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "engine/kernel/route.hpp"

namespace plumb::drivers::lower {

Result<link::LinkInfo> find_master(netlink::Socket& nl, const std::string& name, const std::string& where_ns,
                                   const std::string& network) {
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

Result<Keys> parse_keys(const json::Value& conf, const std::string& network) {
  Keys k;
  if (auto v = PLUMB_TRY(json::get_string(conf, "master", network))) {
    if (!v->empty() && !link::valid_ifname(*v)) {
      return fail(cni_code::kInvalidConfig, network + ".master \"" + *v + "\" is not a valid interface name");
    }
    k.master = *v;
  }
  k.mtu_bytes = PLUMB_TRY(parse_mtu(conf, network));
  k.link_in_container = PLUMB_TRY(json::get_bool(conf, "linkInContainer", network)).value_or(false);
  return k;
}

netlink::Socket& master_socket(const Context& ctx, const Keys& k) { return k.link_in_container ? *ctx.pod : *ctx.node; }

Result<link::LinkInfo> resolve_master(const Context& ctx, const Keys& k, const std::string& name) {
  const std::string where = k.link_in_container ? "the pod namespace " + ctx.netns_path : std::string("the node namespace");
  link::LinkInfo master = PLUMB_TRY(find_master(master_socket(ctx, k), name, where, ctx.network));
  if (k.mtu_bytes && *k.mtu_bytes > master.mtu_bytes) {
    return fail(cni_code::kInvalidConfig, ctx.network + ".mtu " + std::to_string(*k.mtu_bytes) + " is above the MTU " +
                                              std::to_string(master.mtu_bytes) + " of master " + master.name);
  }
  return master;
}

Result<link::LinkInfo> create_in_pod(Context& ctx, const std::string& what, const Keys& k, steps::PodLinkSpec spec) {
  // No look-up first: the kernel refuses a taken name (EEXIST), and the deletion recorded by the
  // step leaves a link of another group alone.
  auto st =
      steps::run(ctx, steps::CreatePodLink{ctx.ifname, link::kPodLinkGroup, k.link_in_container, std::move(spec)});
  if (!st && st.error().sys_errno == EEXIST) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  if (!st) return std::unexpected(st.error().within(ctx.network + ": " + what + " for " + ctx.ifname));
  auto made = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!made) return fail(cni_code::kKernel, ctx.ifname + " not found in " + ctx.netns_path + " after creation");
  return *made;
}

Status notify_neighbours(Context& ctx, const cni::CniResult& r) {
  bool v6 = std::any_of(r.ips.begin(), r.ips.end(), [](const cni::IpConfig& ip) { return !ip.address.addr.is_v4(); });
  if (!v6) return {};
  return steps::run(ctx, steps::WritePodSysctl{"net/ipv6/conf/" + ctx.ifname + "/ndisc_notify", "1"});
}

void announce(Context& ctx, const link::LinkInfo& pod_link, const cni::CniResult& r) {
  if (auto m = pod_link.mac()) announce_addresses(ctx, pod_link.index, *m, r, std::chrono::milliseconds(0), false);
}

}  // namespace plumb::drivers::lower
