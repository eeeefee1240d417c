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
#include "drivers/undo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/nft/nft.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::drivers {
namespace {

/// The bridge plugin's configuration, validated.
struct BridgeConfig : Config {
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

Result<BridgeConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  BridgeConfig c;
  const std::string& where = in.network;
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
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, in.network)).value_or(0);
  if (auto v = PLUMB_TRY(json::get_int(conf, "vlan", where))) {
    if (*v < 0 || *v > 4094) return fail(cni_code::kInvalidConfig, where + ".vlan " + std::to_string(*v) + " must be 0..4094");
    c.vlan = static_cast<int>(*v);
  }
  c.vlan_trunk = PLUMB_TRY(json::get_array(conf, "vlanTrunk", where)) != nullptr;
  c.mac = PLUMB_TRY(requested_mac(conf, in));
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
    PLUMB_TRY(undo::will(ctx, undo::BridgeDelIfUnused{c.bridge}, /*rollback_only=*/true));
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

Result<cni::CniResult> bridge_add(Context& ctx, const BridgeConfig& c, const cni::CniResult*) {
  link::LinkInfo br = PLUMB_TRY(ensure_bridge(ctx, c));

  // The veth pair, pod end created directly in the pod namespace under its final name.
  std::string host;
  for (int attempt = 0;; ++attempt) {
    host = random_ifname("veth");
    PLUMB_TRY(undo::will(ctx, undo::LinkDel{"node", host}));
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

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam));
  apply_config_dns(r, c.dns, /*always=*/false);  // as the reference bridge: a non-empty config "dns" replaces the IPAM's
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
    subnets.reserve(r.ips.size());
    for (auto& ip : r.ips) subnets.push_back(ip.address.network());
    for (auto& ip : r.ips) {
      PLUMB_TRY(undo::will(ctx, undo::MasqDel{ip.address.addr.str()}));
      PLUMB_TRY(nft::add_masquerade(ctx.network, subnets, ip.address.addr));
    }
  }
  return r;
}

Status bridge_check(Context& ctx, const BridgeConfig& c, const cni::CniResult& prev) {
  auto br = PLUMB_TRY(link::get(*ctx.node, c.bridge));
  if (!br || br->kind != "bridge") return fail(cni_code::kKernel, "CHECK: bridge " + c.bridge + " does not exist");
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "veth"));
  PLUMB_TRY(check_pod_routes(ctx, prev));
  PLUMB_TRY(check_pod_addresses(ctx, pod_link.index, prev));
  if (pod_link.master_index == 0) {
    // The pod end has no master; the host end must be a port of the bridge.
    auto host = PLUMB_TRY(link::get(*ctx.node, pod_link.link_index));
    if (pod_link.link_netnsid && (!host || host->master_index != br->index)) {
      return fail(cni_code::kKernel, "CHECK: the host end of " + ctx.ifname + " is not a port of bridge " + c.bridge);
    }
  }
  return {};
}

}  // namespace

const Driver kBridge = make_driver<BridgeConfig, parse_config, bridge_add, bridge_check>("bridge");

namespace undo {

Status run_op(Context& ctx, const BridgeDelIfUnused& op) {
  auto br = PLUMB_TRY(link::get(*ctx.node, op.name));
  if (!br || br->kind != "bridge") return {};
  auto links = PLUMB_TRY(link::list(*ctx.node));
  for (auto& l : links) {
    if (l.master_index == br->index) return {};  // still in use by another attachment
  }
  auto removed = link::remove(*ctx.node, br->index);
  if (!removed) return std::unexpected(removed.error().within("undo: delete bridge " + op.name));
  return {};
}

Status run_op(Context&, const MasqDel& op) {
  auto ip = PLUMB_TRY(IpAddr::parse(op.ip));
  auto removed = nft::del_masquerade(ip);
  if (!removed) return std::unexpected(removed.error().within("undo: remove masquerade of " + ip.str()));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
