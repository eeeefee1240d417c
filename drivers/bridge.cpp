// The reference "bridge" plugin, natively: bridge ensured, veth pair created with its peer
// directly in the pod namespace under the requested name, host end enslaved, IPAM, gateway
// addresses on the bridge, arp_notify on the pod end (with an IPAM), addresses (IPv6 without DAD
// unless enabledad) and routes in the pod, ipMasq through plumb's nftables table.
// Keys: bridge, isGateway, isDefaultGateway, forceAddress, ipMasq, ipMasqBackend ("iptables" /
// "nftables": checked as ptp does, plumb always uses nftables), mtu, hairpinMode, promiscMode,
// vlan, vlanTrunk, preserveDefaultVlan, macspoofchk, portIsolation, disableContainerInterface,
// enabledad, mac (runtimeConfig.mac, args.cni.mac, CNI_ARGS MAC=), ipam.
// VLANs as the reference: `vlan` or `vlanTrunk` create the bridge with VLAN filtering; the host
// port loses its default VLAN (unless preserveDefaultVlan) and gets `vlan` as PVID untagged and
// every trunk VID tagged (a trunk without `vlan` gets VID 1 as PVID untagged), over bridge VLAN
// netlink (engine/kernel/bridge_port.hpp); with isGateway and `vlan` the gateway addresses go on
// a veth "<bridge>.<vlan>" whose peer is a port of the bridge in that VLAN. A kernel without
// bridge VLAN filtering fails such an ADD with kKernelFeature.
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/bridge_port.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/nft/macspoof.hpp"
#include "engine/nft/nft.hpp"

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
  uint16_t vlan = 0;                 // 0: none
  bool vlan_trunk_given = false;     // "vlanTrunk" present (even empty): the bridge filters VLANs
  std::vector<uint16_t> trunk_vids;  // every VID of vlanTrunk, sorted, unique
  bool preserve_default_vlan = false;
  bool macspoofchk = false;
  bool port_isolation = false;
  bool disable_container_interface = false;
  std::optional<Mac> mac;  // the pod interface's MAC
  bool vlan_filtering() const { return vlan != 0 || vlan_trunk_given; }
};

/// One VID of a vlanTrunk entry ("id", "minID", "maxID"): 1..4094.
Result<std::optional<uint16_t>> trunk_vid(const json::Value& item, const char* key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_int(item, key, where));
  if (!v) return std::optional<uint16_t>{};
  if (*v <= 0 || *v > 4094) {
    return fail(cni_code::kInvalidConfig, where + "." + key + " " + std::to_string(*v) + ": incorrect trunk " + key + " parameter (1..4094)");
  }
  return std::optional<uint16_t>(static_cast<uint16_t>(*v));
}

/// vlanTrunk as the reference's collectVlanTrunk: [{"minID": a, "maxID": b}, {"id": c}, ...].
Result<std::vector<uint16_t>> parse_trunk(const json::Value& trunk, const std::string& where) {
  std::set<uint16_t> vids;
  for (rapidjson::SizeType i = 0; i < trunk.Size(); ++i) {
    const std::string at = where + ".vlanTrunk[" + std::to_string(i) + "]";
    if (!trunk[i].IsObject()) return fail(cni_code::kInvalidConfig, at + " is not an object");
    auto min = PLUMB_TRY(trunk_vid(trunk[i], "minID", at));
    auto max = PLUMB_TRY(trunk_vid(trunk[i], "maxID", at));
    if (min.has_value() != max.has_value()) {
      return fail(cni_code::kInvalidConfig, at + ": minID and maxID should be configured simultaneously, " +
                                                (min ? "maxID" : "minID") + " is missing");
    }
    if (min && *max < *min) return fail(cni_code::kInvalidConfig, at + ": minID is greater than maxID in trunk parameter");
    if (min) {
      for (uint32_t v = *min; v <= *max; ++v) vids.insert(static_cast<uint16_t>(v));
    }
    if (auto id = PLUMB_TRY(trunk_vid(trunk[i], "id", at))) vids.insert(*id);
  }
  return std::vector<uint16_t>(vids.begin(), vids.end());
}

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
  PLUMB_TRY(check_ipmasq_backend(conf, where));
  c.hairpin = PLUMB_TRY(json::get_bool(conf, "hairpinMode", where)).value_or(false);
  c.promisc = PLUMB_TRY(json::get_bool(conf, "promiscMode", where)).value_or(false);
  c.enable_dad = PLUMB_TRY(json::get_bool(conf, "enabledad", where)).value_or(false);
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, in.network)).value_or(0);
  if (auto v = PLUMB_TRY(json::get_int(conf, "vlan", where))) {
    if (*v < 0 || *v > 4094) return fail(cni_code::kInvalidConfig, where + ".vlan " + std::to_string(*v) + " must be 0..4094");
    c.vlan = static_cast<uint16_t>(*v);
  }
  if (const json::Value* trunk = PLUMB_TRY(json::get_array(conf, "vlanTrunk", where))) {
    c.vlan_trunk_given = true;
    c.trunk_vids = PLUMB_TRY(parse_trunk(*trunk, where));
  }
  c.preserve_default_vlan = PLUMB_TRY(json::get_bool(conf, "preserveDefaultVlan", where)).value_or(false);
  c.macspoofchk = PLUMB_TRY(json::get_bool(conf, "macspoofchk", where)).value_or(false);
  c.port_isolation = PLUMB_TRY(json::get_bool(conf, "portIsolation", where)).value_or(false);
  c.disable_container_interface = PLUMB_TRY(json::get_bool(conf, "disableContainerInterface", where)).value_or(false);
  if (c.hairpin && c.promisc) {
    return fail(cni_code::kInvalidConfig, where + ": cannot set hairpin mode and promiscuous mode at the same time");
  }
  const json::Value* ipam = PLUMB_TRY(json::get_object(conf, "ipam", where));
  if (c.disable_container_interface && ipam != nullptr && json::find(*ipam, "type") != nullptr) {
    return fail(cni_code::kInvalidConfig, where + ": cannot use IPAM when disableContainerInterface is set");
  }
  c.mac = PLUMB_TRY(requested_mac(conf, in));
  return c;
}

std::string vlan_feature_text(const BridgeConfig& c) {
  std::string what = c.vlan != 0 ? "vlan " + std::to_string(c.vlan) : std::string("vlanTrunk");
  if (c.vlan != 0 && c.vlan_trunk_given) what += " / vlanTrunk";
  return "bridge " + c.bridge + ": " + what + " needs bridge VLAN filtering, which this kernel does not support";
}

/// The VLANs of bridge port `port`, as the reference setupVeth: the default VLAN removed unless
/// preserveDefaultVlan, `pvid` (0: none) as PVID untagged, each of `trunk` tagged, VID 1 as PVID
/// untagged for a trunk without a PVID.
Status configure_port_vlans(Context& ctx, const BridgeConfig& c, const link::LinkInfo& port, uint16_t pvid,
                            const std::vector<uint16_t>& trunk) {
  if (pvid == 0 && trunk.empty()) return {};
  auto wrap = [&](Status st) -> Status {
    if (!st && st.error().cni_code == cni_code::kKernelFeature) return fail(cni_code::kKernelFeature, vlan_feature_text(c), st.error().text());
    if (!st) return std::unexpected(st.error().within("bridge " + c.bridge + " port " + port.name));
    return {};
  };
  steps::SetPortVlans vlans{port.index, port.name, {}, {}};
  if (!c.preserve_default_vlan) {
    for (auto& v : PLUMB_TRY(bridge_port::vlans(*ctx.node, port.index))) vlans.remove.push_back(v.vid);
  }
  if (pvid != 0) vlans.add.push_back({pvid, true, true});
  for (uint16_t v : trunk) vlans.add.push_back({v, false, false});
  if (pvid == 0) vlans.add.push_back({1, true, true});
  return wrap(steps::run(ctx, vlans));
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
    link::BridgeSpec spec{c.bridge, c.mtu_bytes, random_local_mac(), c.vlan_filtering()};
    auto st = steps::run(ctx, steps::CreateBridge{spec});
    if (!st) {
      if (spec.vlan_filtering && st.error().cni_code == cni_code::kKernelFeature) {
        return fail(cni_code::kKernelFeature, vlan_feature_text(c), st.error().text());
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
  link::LinkChange ch;
  if (!br->up()) ch.up = true;
  if (c.promisc && !(br->flags & IFF_PROMISC)) ch.promisc = true;
  if (ch.up || ch.promisc) PLUMB_TRY(steps::run(ctx, steps::SetUpBridge{br->index, br->name, ch}));
  return *br;
}

/// Ensures the gateway address `gw` (with the subnet's prefix length) is on `br` (the bridge, or
/// the VLAN's gateway interface), as the reference ensureAddr: an existing different address in
/// an overlapping subnet is an error unless forceAddress, which replaces it. A rollback removes an
/// address it added only while bridge `bridge` has no port but this attachment's `port`. A warm
/// worker's ctx.node_watch spares the look-up while no address of `br` has changed since one
/// found `gw` there.
Status ensure_gateway_addr(Context& ctx, const link::LinkInfo& br, const IpPrefix& gw, bool force,
                           const std::string& bridge, const std::string& port) {
  netconf::Watch* watch = ctx.node_watch;
  if (watch != nullptr) {
    watch->refresh();
    if (watch->has_address(br.index, gw)) return {};
    if (!watch->watch_addresses(br.index)) watch = nullptr;  // the look-up below is not remembered
  }
  auto addrs = PLUMB_TRY(addr::list(*ctx.node, br.index, gw.addr.family));
  for (auto& a : addrs) {
    if (a.prefix.addr.family == AF_INET6 && a.scope == RT_SCOPE_LINK) continue;
    if (a.prefix.addr == gw.addr) {
      if (watch != nullptr) watch->note_address(br.index, gw);
      return {};
    }
    if (a.prefix.contains(gw.addr) || gw.contains(a.prefix.addr)) {
      if (!force) {
        return fail(cni_code::kConflict, "bridge " + br.name + " already has an IP address " + a.prefix.str() +
                                              " different from " + gw.str() + " (set forceAddress to replace it)");
      }
      PLUMB_TRY(steps::run(ctx, steps::RemoveNodeAddress{br.index, br.name, a.prefix}));
    }
  }
  auto st =
      steps::run(ctx, steps::AddNodeAddress{br.index, br.name, gw, /*nodad=*/true, /*shared=*/true, bridge, port});
  if (!st) return std::unexpected(st.error().within("gateway"));
  return {};
}

/// Makes `port` a port of `br`, up, with the port options of the config and VLANs `pvid`/`trunk`.
Status setup_port(Context& ctx, const BridgeConfig& c, const link::LinkInfo& br, const link::LinkInfo& port, uint16_t pvid,
                  const std::vector<uint16_t>& trunk, bool pod_port) {
  if (port.master_index != br.index || !port.up()) {  // a pod's veth is both from birth
    link::LinkChange change;
    change.master_index = br.index;
    change.up = true;
    PLUMB_TRY(steps::run(ctx, steps::SetUpNodeLink{port.index, change}));
  }
  if (pod_port && (c.hairpin || c.port_isolation)) {
    PLUMB_TRY(steps::run(ctx, steps::SetBridgePort{port.index, c.hairpin, c.port_isolation}));
  }
  return configure_port_vlans(ctx, c, port, pvid, trunk);
}

/// The gateway interface of VLAN c.vlan, as the reference's ensureVlanInterface: a veth
/// "<bridge>.<vlan>" in the node whose peer is a port of the bridge in that VLAN (shared by every
/// pod of the VLAN; only an ADD that created it and fails removes it).
Result<link::LinkInfo> ensure_vlan_gateway(Context& ctx, const BridgeConfig& c, const link::LinkInfo& br) {
  const std::string name = c.bridge + "." + std::to_string(c.vlan);
  if (!link::valid_ifname(name)) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": the VLAN gateway interface \"" + name +
                                              "\" is not a valid interface name (bridge name + \".\" + vlan must fit 15 characters)");
  }
  if (auto gw = PLUMB_TRY(link::get(*ctx.node, name))) return *gw;
  const std::string peer = random_ifname("veth");
  PLUMB_TRY(steps::run(ctx, steps::CreateSharedVeth{{peer, name, -1, br.mtu_bytes, std::nullopt, std::nullopt}}));
  auto peer_link = PLUMB_TRY(link::get(*ctx.node, peer));
  auto gw = PLUMB_TRY(link::get(*ctx.node, name));
  if (!peer_link || !gw) return fail(cni_code::kKernel, "VLAN gateway veth " + name + "/" + peer + " not found after creation");
  PLUMB_TRY(setup_port(ctx, c, br, *peer_link, c.vlan, {}, false));
  link::LinkChange up;
  up.up = true;
  PLUMB_TRY(steps::run(ctx, steps::SetUpNodeLink{gw->index, up}));
  return *gw;
}

/// isGateway: the gateway addresses on the bridge (or the VLAN's gateway interface, added to the
/// result), default routes with isDefaultGateway, forwarding on. `port`: this attachment's port of the
/// bridge (its veth's host end).
Status configure_gateways(Context& ctx, const BridgeConfig& c, const link::LinkInfo& br, const std::string& port,
                          cni::CniResult& r) {
  std::optional<link::LinkInfo> gw_link;
  if (c.vlan != 0 && !r.ips.empty()) {
    gw_link = PLUMB_TRY(ensure_vlan_gateway(ctx, c, br));
    r.interfaces.push_back({gw_link->name, gw_link->mac() ? gw_link->mac()->str() : "", std::nullopt, "", {}, {}});
  }
  bool v4 = false, v6 = false;
  for (auto& ip : r.ips) {
    if (!ip.gateway) ip.gateway = ip.address.network().addr.plus(1);
    PLUMB_TRY(ensure_gateway_addr(ctx, gw_link ? *gw_link : br, IpPrefix{*ip.gateway, ip.address.len}, c.force_address,
                                  br.name, port));
    (ip.address.addr.is_v4() ? v4 : v6) = true;
    if (!c.is_default_gateway) continue;
    bool has_default = false;
    for (auto& rt : r.routes) has_default |= rt.dst.len == 0 && rt.dst.addr.family == ip.address.addr.family;
    if (!has_default) {
      cni::RouteEntry def;
      def.dst = PLUMB_TRY(IpPrefix::parse(ip.address.addr.is_v4() ? "0.0.0.0/0" : "::/0"));
      def.gw = ip.gateway;
      r.routes.push_back(def);
    }
  }
  if (v4) PLUMB_TRY(steps::run(ctx, steps::EnableForwarding{AF_INET}));
  if (v6) PLUMB_TRY(steps::run(ctx, steps::EnableForwarding{AF_INET6}));
  return {};
}

Result<cni::CniResult> bridge_add(Context& ctx, const BridgeConfig& c, const cni::CniResult*) {
  link::LinkInfo br = PLUMB_TRY(ensure_bridge(ctx, c));
  // The host end a port of `br` and up from birth (one message, as the floor does: enslaving and
  // bringing it up later were two more). The IPAM's release is announced with the veth: one
  // record write for both.
  const bool release_registered = ipam_release_ahead(ctx, c.ipam);
  PodVeth veth = PLUMB_TRY(create_pod_veth(ctx, {"", "", -1, c.mtu_bytes, std::nullopt, c.mac, link::kPodLinkGroup, br.index, true}));
  const link::LinkInfo& host_link = veth.host;
  const link::LinkInfo& pod_link = veth.pod;
  PLUMB_TRY(setup_port(ctx, c, br, host_link, c.vlan, c.trunk_vids, true));
  if (c.macspoofchk) {
    if (!pod_link.mac()) return fail(cni_code::kKernel, "macspoofchk: " + ctx.ifname + " has no Ethernet MAC");
    PLUMB_TRY(
        steps::run(ctx, steps::AddMacspoof{host_link.name, *pod_link.mac(), ctx.container_id + "/" + ctx.ifname}));
  }

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam, release_registered));
  apply_config_dns(r, c.dns, /*always=*/false);  // as the reference bridge: a non-empty config "dns" replaces the IPAM's
  r.interfaces.clear();
  r.interfaces.push_back({br.name, br.mac() ? br.mac()->str() : "", std::nullopt, "", {}, {}});
  r.interfaces.push_back({host_link.name, host_link.mac() ? host_link.mac()->str() : "", std::nullopt, "", {}, {}});
  r.interfaces.push_back({ctx.ifname, pod_link.mac() ? pod_link.mac()->str() : "", pod_link.mtu_bytes, ctx.netns_path, {}, {}});
  for (auto& ip : r.ips) ip.interface = 2;
  if (c.is_gateway) PLUMB_TRY(configure_gateways(ctx, c, br, host_link.name, r));

  // With disableContainerInterface the pod end stays down (and has no addresses: no IPAM). With
  // an IPAM, arp_notify as the reference bridge (since v1.1.0): the gratuitous ARP of its coming
  // up tells the gateway and the other pods the address's new MAC.
  if (!c.disable_container_interface) PLUMB_TRY(configure_pod_interface(ctx, pod_link.index, r, c.enable_dad, c.ipam.ipam != nullptr));

  if (c.ip_masq) PLUMB_TRY(masquerade_addresses(ctx, r));
  return r;
}

/// CHECK of the host port's VLANs: the PVID and every trunk VID are there.
Status check_port_vlans(Context& ctx, const BridgeConfig& c, const link::LinkInfo& host) {
  if (!c.vlan_filtering()) return {};
  auto have = PLUMB_TRY(bridge_port::vlans(*ctx.node, host.index));
  auto has = [&](const bridge_port::PortVlan& want) { return std::find(have.begin(), have.end(), want) != have.end(); };
  const uint16_t pvid = c.vlan != 0 ? c.vlan : (c.trunk_vids.empty() ? 0 : 1);
  if (pvid != 0 && !has({pvid, true, true})) {
    return fail(cni_code::kKernel, "CHECK: bridge port " + host.name + " lacks VLAN " + std::to_string(pvid) + " (PVID, untagged)");
  }
  for (uint16_t v : c.trunk_vids) {
    if (v != pvid && !has({v, false, false})) {
      return fail(cni_code::kKernel, "CHECK: bridge port " + host.name + " lacks trunk VLAN " + std::to_string(v));
    }
  }
  return {};
}

Status bridge_check(Context& ctx, const BridgeConfig& c, const cni::CniResult& prev) {
  auto br = PLUMB_TRY(link::get(*ctx.node, c.bridge));
  if (!br || br->kind != "bridge") return fail(cni_code::kKernel, "CHECK: bridge " + c.bridge + " does not exist");
  link::LinkInfo pod_link;
  if (c.disable_container_interface) {  // the pod end is down by design: only its existence is checked
    auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
    if (!l || l->kind != "veth") return fail(cni_code::kKernel, "CHECK: veth " + ctx.ifname + " not found in " + ctx.netns_path);
    pod_link = *l;
  } else {
    pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "veth"));
  }
  PLUMB_TRY(check_pod_routes(ctx, prev));
  PLUMB_TRY(check_pod_addresses(ctx, pod_link.index, prev));
  // The host end must be a port of the bridge.
  auto host = PLUMB_TRY(link::get(*ctx.node, pod_link.link_index));
  if (!pod_link.link_netnsid || !host || host->master_index != br->index) {
    return fail(cni_code::kKernel, "CHECK: the host end of " + ctx.ifname + " is not a port of bridge " + c.bridge);
  }
  PLUMB_TRY(check_port_vlans(ctx, c, *host));
  if (c.macspoofchk && pod_link.mac()) PLUMB_TRY(nft::check_macspoof(host->name, *pod_link.mac()));
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

Status run_op(Context&, const MacspoofDel& op) {
  auto removed = nft::del_macspoof(op.port, op.mac);
  if (!removed) return std::unexpected(removed.error().within("undo: remove the MAC spoof check of " + op.port));
  return {};
}

Status run_op(Context&, const MasqDel& op) {
  auto removed = nft::del_masquerade(op.ip);
  if (!removed) return std::unexpected(removed.error().within("undo: remove masquerade of " + op.ip.str()));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
