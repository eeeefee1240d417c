// The reference "ptp" plugin, natively: a veth pair whose pod end carries the IPAM addresses and
// whose host end is a point-to-point hop to the node, without a bridge. The reference's layout:
//
//   pod:   <ip>/<len> on ifname; the kernel's connected route <subnet> is replaced by
//            <gw>/32 dev ifname scope link src <ip>          (128 for IPv6)
//            <subnet> via <gw> dev ifname src <ip>
//          plus the IPAM's routes (e.g. default via <gw>)
//   node:  <gw>/32 on the host veth (IPv6: /128, no DAD), accept_ra=0 on it,
//          <ip>/32 dev <host veth> scope host                 (128 for IPv6)
//          ip_forward / ipv6 forwarding on
//
// Every address of the IPAM result needs a gateway (host-local gives the subnet's first address).
// Keys: mtu, ipMasq (plumb's nftables masquerade, as the bridge's), ipMasqBackend ("iptables" /
// "nftables": accepted, plumb always uses nftables), mac (the "mac" capability runtimeConfig.mac,
// args.cni.mac, CNI_ARGS MAC=: the pod end's MAC; a plumb addition, containernetworking/plugins
// #492), ipam (required).
// Result: interfaces [host veth, pod end], every ip on interface 1 (as the reference).
// DEL: the host veth is deleted (its peer, addresses and routes go with it), the masquerade
// elements removed, the addresses released (undo journal).
#include <sys/socket.h>

#include <algorithm>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"

namespace plumb::drivers {
namespace {

/// The ptp plugin's configuration, validated.
struct PtpConfig : Config {
  std::optional<uint32_t> mtu_bytes;
  bool ip_masq = false;
  std::optional<Mac> mac;  // the pod end's MAC
};

Result<PtpConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  PtpConfig c;
  const std::string& where = in.network;
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, where));
  c.ip_masq = PLUMB_TRY(json::get_bool(conf, "ipMasq", where)).value_or(false);
  PLUMB_TRY(check_ipmasq_backend(conf, where));
  c.mac = PLUMB_TRY(requested_mac(conf, in));
  const json::Value* ipam_conf = PLUMB_TRY(json::get_object(conf, "ipam", where));
  if (ipam_conf == nullptr || json::find(*ipam_conf, "type") == nullptr) {
    return fail(cni_code::kInvalidConfig, where + ": ptp needs an \"ipam\" with a \"type\" (the pod's addresses and gateways)");
  }
  return c;
}

IpPrefix host_prefix(const IpAddr& a) { return IpPrefix{a, static_cast<uint8_t>(a.is_v4() ? 32 : 128)}; }

/// The pod end's routes as the reference lays them out: the connected subnet route replaced by
/// a link route to the gateway and the subnet via the gateway, both with the pod address as source.
Status pod_routes(Context& ctx, int index, const cni::IpConfig& ip) {
  const IpAddr& gw = *ip.gateway;
  route::Route connected;
  connected.dst = ip.address.network();
  connected.oif = index;
  auto removed = steps::run(ctx, steps::RemoveOwnLinkRoute{steps::Ns::kPod, connected});
  if (!removed) return std::unexpected(removed.error().within(ctx.network + ": ptp"));
  route::Route to_gw;
  to_gw.dst = host_prefix(gw);
  to_gw.oif = index;
  to_gw.scope = RT_SCOPE_LINK;
  to_gw.prefsrc = ip.address.addr;
  PLUMB_TRY(steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, to_gw, false}));
  route::Route subnet;
  subnet.dst = ip.address.network();
  subnet.gw = gw;
  subnet.oif = index;
  subnet.prefsrc = ip.address.addr;
  return steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, subnet, false});
}

/// The host end: up, accept_ra off, the gateway addresses, a host route to each pod address.
Status host_side(Context& ctx, const link::LinkInfo& host, const cni::CniResult& r) {
  link::LinkChange up;
  up.up = true;
  PLUMB_TRY(steps::run(ctx, steps::SetUpNodeLink{host.index, up}));
  bool v4 = false, v6 = false;
  for (auto& ip : r.ips) (ip.address.addr.is_v4() ? v4 : v6) = true;
  if (v6) PLUMB_TRY(steps::run(ctx, steps::WriteNodeLinkSysctl{"net/ipv6/conf/" + host.name + "/accept_ra", "0"}));
  for (auto& ip : r.ips) {
    auto st = steps::run(ctx, steps::AddOwnLinkAddress{steps::Ns::kNode, host.index, host_prefix(*ip.gateway), true});
    if (!st) return std::unexpected(st.error().within(ctx.network + ": ptp host side " + host.name));
    route::Route to_pod;
    to_pod.dst = host_prefix(ip.address.addr);
    to_pod.oif = host.index;
    to_pod.scope = RT_SCOPE_HOST;
    st = steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kNode, to_pod, true});
    if (!st) return std::unexpected(st.error().within(ctx.network + ": ptp host route"));
  }
  if (v4) PLUMB_TRY(steps::run(ctx, steps::EnableForwarding{AF_INET}));
  if (v6) PLUMB_TRY(steps::run(ctx, steps::EnableForwarding{AF_INET6}));
  return {};
}

Result<cni::CniResult> ptp_add(Context& ctx, const PtpConfig& c, const cni::CniResult*) {
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam));
  apply_config_dns(r, c.dns, /*always=*/false);  // as the reference ptp: a non-empty config "dns" replaces the IPAM's
  if (r.ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + ": IPAM plugin returned missing IP config");
  for (auto& ip : r.ips) {
    if (!ip.gateway) {
      return fail(cni_code::kInvalidConfig, ctx.network + ": ptp needs a gateway for address " + ip.address.str() +
                                                " (the IPAM returned none)");
    }
  }
  // The pod end born in the pod namespace under its final name.
  PodVeth veth = PLUMB_TRY(create_pod_veth(ctx, {"", "", -1, c.mtu_bytes.value_or(0), std::nullopt, c.mac, link::kPodLinkGroup}));
  const link::LinkInfo& host = veth.host;
  const link::LinkInfo& pod = veth.pod;
  r.interfaces.clear();
  r.interfaces.push_back({host.name, host.mac() ? host.mac()->str() : "", std::nullopt, "", {}, {}});
  r.interfaces.push_back({ctx.ifname, pod.mac() ? pod.mac()->str() : "", pod.mtu_bytes, ctx.netns_path, {}, {}});
  for (auto& ip : r.ips) ip.interface = 1;

  PLUMB_TRY(configure_pod_interface(ctx, pod.index, r, /*dad=*/false));
  for (auto& ip : r.ips) PLUMB_TRY(pod_routes(ctx, pod.index, ip));
  PLUMB_TRY(host_side(ctx, host, r));

  if (c.ip_masq) PLUMB_TRY(masquerade_addresses(ctx, r));
  return r;
}

Status ptp_check(Context& ctx, const PtpConfig&, const cni::CniResult& prev) {
  link::LinkInfo pod = PLUMB_TRY(check_pod_interface(ctx, prev, "veth"));
  PLUMB_TRY(check_pod_addresses(ctx, pod.index, prev));
  PLUMB_TRY(check_pod_routes(ctx, prev));
  for (auto& ip : prev.ips) {
    if (!ip.gateway) continue;
    auto routes = PLUMB_TRY(route::list(*ctx.pod, ip.address.addr.family));
    bool via = std::any_of(routes.begin(), routes.end(), [&](const route::Route& rt) {
      return rt.dst == ip.address.network() && rt.gw && *rt.gw == *ip.gateway;
    });
    if (!via) {
      return fail(cni_code::kKernel, "CHECK: route " + ip.address.network().str() + " via " + ip.gateway->str() +
                                         " is missing in " + ctx.netns_path);
    }
  }
  return {};
}

}  // namespace

const Driver kPtp = make_driver<PtpConfig, parse_config, ptp_add, ptp_check>("ptp");

}  // namespace plumb::drivers
