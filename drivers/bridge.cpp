// The reference "bridge" plugin, natively: bridge ensured, veth pair created with its peer
// directly in the pod namespace under the requested name, host end enslaved, IPAM, gateway
// addresses on the bridge, routes in the pod, ipMasq through plumb's nftables table.
// Keys: bridge, isGateway, isDefaultGateway, forceAddress, ipMasq, mtu, hairpinMode, promiscMode,
// vlan, vlanTrunk, preserveDefaultVlan, enabledad, mac (runtimeConfig.mac, args.cni.mac, CNI_ARGS
// MAC=), ipam.
#include <net/if.h>

#include <algorithm>
#include <sys/socket.h>

#include "drivers/registry.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/nft/nft.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::drivers {
namespace {

/// The bridge plugin's configuration, validated.
struct BridgeConfig {
  std::string bridge = "cni0";
  bool is_gateway = false;
  bool is_default_gateway = false;
  bool force_address = false;
  bool ip_masq = false;
  bool hairpin = false;
  bool promisc = false;
  bool enable_dad = false;
  uint32_t mtu_bytes = 0;
  int vlan = 0;
  bool vlan_trunk = false;
  std::optional<Mac> mac;  // the pod interface's MAC
};

Result<BridgeConfig> parse_config(const json::Value& conf, const Context& ctx) {
  BridgeConfig c;
  const std::string where = ctx.network;
  if (auto v = PLUMB_TRY(json::get_string(conf, "bridge", where))) {
    if (!link::valid_ifname(*v)) return fail(cni_code::kInvalidConfig, where + ".bridge \"" + *v + "\" is not a valid interface name");
    c.bridge = *v;
  }
  c.is_gateway = PLUMB_TRY(json::get_bool(conf, "isGateway", where)).value_or(false);
  c.is_default_gateway = PLUMB_TRY(json::get_bool(conf, "isDefaultGateway", where)).value_or(false);
  if (c.is_default_gateway) c.is_gateway = true;  // as the reference plugin
  c.force_address = PLUMB_TRY(json::get_bool(conf, "forceAddress", where)).value_or(false);
  c.ip_masq = PLUMB_TRY(json::get_bool(conf, "ipMasq", where)).value_or(false);
  c.hairpin = PLUMB_TRY(json::get_bool(conf, "hairpinMode", where)).value_or(false);
  c.promisc = PLUMB_TRY(json::get_bool(conf, "promiscMode", where)).value_or(false);
  c.enable_dad = PLUMB_TRY(json::get_bool(conf, "enabledad", where)).value_or(false);
  if (auto m = PLUMB_TRY(json::get_int(conf, "mtu", where))) {
    if (*m < 0 || *m > 65535) return fail(cni_code::kInvalidConfig, where + ".mtu " + std::to_string(*m) + " is out of range");
    c.mtu_bytes = static_cast<uint32_t>(*m);
  }
  if (auto v = PLUMB_TRY(json::get_int(conf, "vlan", where))) {
    if (*v < 0 || *v > 4094) return fail(cni_code::kInvalidConfig, where + ".vlan " + std::to_string(*v) + " must be 0..4094");
    c.vlan = static_cast<int>(*v);
  }
  c.vlan_trunk = PLUMB_TRY(json::get_array(conf, "vlanTrunk", where)) != nullptr;
  c.mac = PLUMB_TRY(requested_mac(ctx, conf));
  return c;
}

Mac random_local_mac() {
  Mac m;
  auto name = random_ifname("");  // 8 hex digits of randomness
  m.bytes = {0x02, 0x00, 0, 0, 0, 0};
  for (size_t i = 0; i < 4; ++i) m.bytes[2 + i] = static_cast<uint8_t>(std::stoul(name.substr(i * 2, 2), nullptr, 16));
  return m;
}

/// Finds or creates the bridge; returns it up.
Result<link::LinkInfo> ensure_bridge(Context& ctx, const BridgeConfig& c) {
  auto br = PLUMB_TRY(link::get(*ctx.node, c.bridge));
  if (!br) {
    PLUMB_TRY(ctx.journal->will(undo::bridge_del_if_unused(c.bridge), /*rollback_only=*/true));
    link::BridgeSpec spec{c.bridge, c.mtu_bytes, random_local_mac(), c.vlan != 0 || c.vlan_trunk};
    auto st = link::create_bridge(*ctx.node, spec);
    if (!st && st.error().sys_errno != EEXIST) {
      if (spec.vlan_filtering) {
        return fail(cni_code::kKernelFeature,
                    "bridge " + c.bridge + ": vlan " + std::to_string(c.vlan) +
                        " needs bridge VLAN filtering, which this kernel does not support",
                    st.error().text());
      }
      return std::unexpected(st.error().within("create bridge " + c.bridge));
    }
    br = PLUMB_TRY(link::get(*ctx.node, c.bridge));
    if (!br) return fail(cni_code::kKernel, "bridge " + c.bridge + " vanished after creation");
  }
  if (br->kind != "bridge") {
    return fail(cni_code::kInvalidConfig, "bridge \"" + c.bridge + "\" already exists but is a " +
                                              (br->kind.empty() ? std::string("non-bridge device") : br->kind));
  }
  if (c.vlan != 0 || c.vlan_trunk) {
    return fail(cni_code::kKernelFeature, "bridge " + c.bridge + ": vlan " + std::to_string(c.vlan) +
                                              (c.vlan_trunk ? " / vlanTrunk" : "") +
                                              " needs bridge VLAN filtering, which this kernel does not support");
  }
  link::LinkChange ch;
  if (!br->up()) ch.up = true;
  if (c.promisc && !(br->flags & IFF_PROMISC)) ch.promisc = true;
  if (ch.up || ch.promisc) PLUMB_TRY(link::modify(*ctx.node, br->index, ch));
  return *br;
}

/// Ensures the gateway address `gw` (with the subnet's prefix length) is on the bridge, as the
/// reference ensureAddr: an existing different address in an overlapping subnet is an error
/// unless forceAddress, which replaces it.
Status ensure_gateway_addr(Context& ctx, const link::LinkInfo& br, const IpPrefix& gw, bool force) {
  auto addrs = PLUMB_TRY(addr::list(*ctx.node, br.index, gw.addr.family));
  for (auto& a : addrs) {
    if (a.prefix.addr.family == AF_INET6 && a.scope == RT_SCOPE_LINK) continue;
    if (a.prefix.addr == gw.addr) return {};
    if (a.prefix.contains(gw.addr) || gw.contains(a.prefix.addr)) {
      if (!force) {
        return fail(cni_code::kConflict, "bridge " + br.name + " already has an IP address " + a.prefix.str() +
                                              " different from " + gw.str() + " (set forceAddress to replace it)");
      }
      PLUMB_TRY(addr::remove(*ctx.node, br.index, a.prefix));
    }
  }
  auto st = addr::add(*ctx.node, br.index, gw, /*nodad=*/true);
  if (!st && st.error().sys_errno != EEXIST) return std::unexpected(st.error().within("add gateway " + gw.str() + " to " + br.name));
  return {};
}

Result<cni::CniResult> bridge_add(Context& ctx, const json::Value& conf, const cni::CniResult*) {
  BridgeConfig c = PLUMB_TRY(parse_config(conf, ctx));
  link::LinkInfo br = PLUMB_TRY(ensure_bridge(ctx, c));

  // The veth pair, pod end created directly in the pod namespace under its final name.
  std::string host;
  for (int attempt = 0;; ++attempt) {
    host = random_ifname("veth");
    PLUMB_TRY(ctx.journal->will(undo::link_del("node", host)));
    link::VethSpec spec{host, ctx.ifname, ctx.pod_ns->fd(), c.mtu_bytes, std::nullopt, c.mac};
    auto st = link::create_veth(*ctx.node, spec);
    if (st) break;
    if (st.error().sys_errno == EEXIST) {
      if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
        return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
      }
      if (attempt < 4) continue;  // host-side name collision: try another name
    }
    return std::unexpected(st.error().within("create veth pair " + host + "/" + ctx.ifname + " in " + ctx.netns_path));
  }
  auto host_link = PLUMB_TRY(link::get(*ctx.node, host));
  auto pod_link = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!host_link || !pod_link) return fail(cni_code::kKernel, "veth pair " + host + "/" + ctx.ifname + " not found after creation");

  link::LinkChange port;
  port.master_index = br.index;
  port.up = true;
  PLUMB_TRY(link::modify(*ctx.node, host_link->index, port));
  if (c.hairpin) PLUMB_TRY(link::set_bridge_port_hairpin(*ctx.node, host_link->index, true));

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, conf));
  r.interfaces.clear();
  r.interfaces.push_back({br.name, br.mac() ? br.mac()->str() : "", std::nullopt, "", {}, {}});
  r.interfaces.push_back({host, host_link->mac() ? host_link->mac()->str() : "", std::nullopt, "", {}, {}});
  r.interfaces.push_back({ctx.ifname, pod_link->mac() ? pod_link->mac()->str() : "", pod_link->mtu_bytes, ctx.netns_path, {}, {}});
  for (auto& ip : r.ips) ip.interface = 2;

  if (c.is_gateway) {
    bool v4 = false, v6 = false;
    for (auto& ip : r.ips) {
      if (!ip.gateway) ip.gateway = ip.address.network().addr.plus(1);
      IpPrefix gw{*ip.gateway, ip.address.len};
      PLUMB_TRY(ensure_gateway_addr(ctx, br, gw, c.force_address));
      (ip.address.addr.is_v4() ? v4 : v6) = true;
      if (c.is_default_gateway) {
        bool has_default = false;
        for (auto& rt : r.routes) has_default |= rt.dst.len == 0 && rt.dst.addr.family == ip.address.addr.family;
        if (!has_default) {
          cni::RouteEntry def;
          def.dst = PLUMB_TRY(IpPrefix::parse(ip.address.addr.is_v4() ? "0.0.0.0/0" : "::/0"));
          def.gw = ip.gateway;
          r.routes.push_back(def);
        }
      }
    }
    if (v4) PLUMB_TRY(sysctl::write("net/ipv4/ip_forward", "1"));
    if (v6) PLUMB_TRY(sysctl::write("net/ipv6/conf/all/forwarding", "1"));
  }

  PLUMB_TRY(configure_pod_interface(*ctx.pod, pod_link->index, r, c.enable_dad));

  if (c.ip_masq) {
    // The network chain is rewritten on every add: give it every subnet of the network (dual
    // stack), not just this address's.
    std::vector<IpPrefix> subnets;
    for (auto& ip : r.ips) subnets.push_back(ip.address.network());
    for (auto& ip : r.ips) {
      PLUMB_TRY(ctx.journal->will(undo::masq_del(ip.address.addr.str())));
      PLUMB_TRY(nft::add_masquerade(ctx.network, subnets, ip.address.addr));
    }
  }
  return r;
}

Status bridge_check(Context& ctx, const json::Value& conf, const cni::CniResult& prev) {
  BridgeConfig c = PLUMB_TRY(parse_config(conf, ctx));
  auto br = PLUMB_TRY(link::get(*ctx.node, c.bridge));
  if (!br || br->kind != "bridge") return fail(cni_code::kKernel, "CHECK: bridge " + c.bridge + " does not exist");
  auto pod_link = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!pod_link) return fail(cni_code::kKernel, "CHECK: interface " + ctx.ifname + " not found in " + ctx.netns_path);
  if (pod_link->kind != "veth") return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is a " + pod_link->kind + ", not a veth");
  if (!pod_link->up()) return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is down");
  for (auto& i : prev.interfaces) {
    if (i.sandbox.empty() || i.name != ctx.ifname) continue;
    if (!i.mac.empty() && pod_link->mac() && pod_link->mac()->str() != i.mac) {
      return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MAC " + pod_link->mac()->str() + ", expected " + i.mac);
    }
    if (i.mtu_bytes && *i.mtu_bytes != pod_link->mtu_bytes) {
      return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MTU " + std::to_string(pod_link->mtu_bytes) +
                                         ", expected " + std::to_string(*i.mtu_bytes));
    }
  }
  for (int family : {AF_INET, AF_INET6}) {
    auto routes = PLUMB_TRY(route::list(*ctx.pod, family));
    for (auto& want : prev.routes) {
      if (want.dst.addr.family != family) continue;
      bool found = std::any_of(routes.begin(), routes.end(), [&](const route::Route& r) {
        return r.dst.network() == want.dst.network() && (!want.gw || (r.gw && *r.gw == *want.gw));
      });
      if (!found) {
        return fail(cni_code::kKernel, "CHECK: route " + want.dst.str() + (want.gw ? " via " + want.gw->str() : "") +
                                           " is missing in " + ctx.netns_path);
      }
    }
  }
  auto addrs = PLUMB_TRY(addr::list(*ctx.pod, pod_link->index));
  for (auto& ip : prev.ips) {
    bool found = std::any_of(addrs.begin(), addrs.end(), [&](const addr::AddrInfo& a) { return a.prefix == ip.address; });
    if (!found) return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " lacks address " + ip.address.str());
  }
  if (pod_link->master_index == 0) {
    // The pod end has no master; the host end must be a port of the bridge.
    auto host = PLUMB_TRY(link::get(*ctx.node, pod_link->link_index));
    if (pod_link->link_netnsid && (!host || host->master_index != br->index)) {
      return fail(cni_code::kKernel, "CHECK: the host end of " + ctx.ifname + " is not a port of bridge " + c.bridge);
    }
  }
  return {};
}

}  // namespace

const Driver kBridge{"bridge", bridge_add, bridge_check};

}  // namespace plumb::drivers
