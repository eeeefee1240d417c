// The reference "portmap" chained plugin, natively: host ports forwarded to the pod through DNAT
// maps in plumb's nftables table (engine/nft/portmap.hpp), one atomic transaction per attachment,
// the ruleset independent of the number of pods. Chained after a plugin that gives the pod its
// addresses (the first IPv4 and the first IPv6 address of the attachment's pod interface in
// prevResult are mapped, as the reference plugin does).
//
// Keys (as the reference plugin):
//   runtimeConfig.portMappings  [{hostPort, containerPort, protocol (tcp|udp|sctp, default tcp),
//                                 hostIP}] via the "portMappings" capability; an IPv4 hostIP maps
//                                 only the IPv4 address, an IPv6 one only the IPv6 address;
//                                 0.0.0.0 / :: mean every address of that family only.
//   snat (default true)          masquerade hairpin traffic (pod to its own host port) and, for
//                                 IPv4, traffic from 127.0.0.0/8 (route_localnet=1 is set on the
//                                 attachment's host-side interfaces so 127.0.0.1:hostPort works).
//   masqAll (default false)      with snat: masquerade every connection DNATed to the pod.
//   markMasqBit (0..31)          validated (and exclusive with externalSetMarkChain) as the
//                                 reference; it has no function in plumb's design, as in the
//                                 reference's own nftables backend, which ignores it too: the
//                                 iptables backend marks packets in its DNAT chain with the bit and
//                                 masquerades marked packets in postrouting; plumb decides in
//                                 postrouting from conntrack's DNAT status and set membership
//                                 (hairpin, localhost, masqAll), so no mark bit is consumed or can
//                                 collide with kube-proxy's (14/15) or Calico's (20-31).
//   externalSetMarkChain         rejected (code 2): it names an iptables chain the reference jumps
//                                 to for that marking; plumb writes no iptables rules and marks
//                                 nothing (README).
//   conditionsV4 / conditionsV6  extra matches before a pod's host ports are DNATed to it, in the
//                                 reference's iptables syntax (-s, -d, -i, -p, !, -m addrtype,
//                                 -m comment) or nftables syntax (ip/ip6 saddr/daddr, iifname,
//                                 meta l4proto, fib type): engine/nft/portmap_conditions.hpp; any
//                                 other token is refused by name (code 2). The syntax must match
//                                 an explicit backend, as the reference requires.
//   backend                      "iptables" / "nftables" (plumb always uses nftables).
// Hairpin on a bridge: with br_netfilter active (bridge-nf-call-iptables=1, the Kubernetes
// default), a DNATed packet whose new destination is behind the bridge it came from is sent back
// through the bridge to the port it arrived on, which the bridge only does for ports in hairpin
// mode: give the bridge plugin "hairpinMode": true (as kubelet does).
// UDP: after the mappings are installed, conntrack entries of UDP flows to the host ports are
// flushed (they would keep their old binding); on removal, the pod's UDP flows through its host
// ports are flushed.
#include "engine/nft/portmap.hpp"

#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/nft/conntrack.hpp"

namespace plumb::drivers {
namespace {

/// One runtimeConfig.portMappings entry, validated.
struct Entry {
  uint8_t l4proto = IPPROTO_TCP;
  uint16_t host_port = 0;
  uint16_t container_port = 0;
  std::optional<IpAddr> host_ip;  // unset: both families, any address
  int host_family = 0;            // AF_INET/AF_INET6 when hostIP was given (also 0.0.0.0 / ::)
};

/// The portmap plugin's configuration, validated.
struct PortmapConfig : Config {
  bool snat = true;
  bool masq_all = false;
  std::vector<Entry> entries;
  nft::Conditions cond4{AF_INET, {}, {}};
  nft::Conditions cond6{AF_INET6, {}, {}};
};

/// conditionsV4 / conditionsV6, checked against an explicit backend as the reference does
/// (ensureBackend: "nftables backend was requested but configuration contains iptables-specific
/// options [...]").
Status parse_all_conditions(const json::Value& conf, const std::string& where, PortmapConfig& c) {
  auto backend = PLUMB_TRY(json::get_string(conf, "backend", where));
  if (backend && *backend != "iptables" && *backend != "nftables") {
    return fail(cni_code::kInvalidConfig, where + ".backend \"" + *backend + "\" must be \"iptables\" or \"nftables\"");
  }
  for (auto [key, family] : {std::pair{"conditionsV4", AF_INET}, std::pair{"conditionsV6", AF_INET6}}) {
    auto conds = PLUMB_TRY(json::get_string_array(conf, key, where)).value_or(std::vector<std::string>{});
    const std::string syntax = nft::conditions_syntax(conds);
    if (syntax.empty()) continue;
    if (backend && *backend != syntax) {
      return fail(cni_code::kInvalidConfig, where + ": " + *backend + " backend was requested but configuration contains " + syntax +
                                                "-specific options [" + key + "]");
    }
    (family == AF_INET ? c.cond4 : c.cond6) = PLUMB_TRY(nft::parse_conditions(conds, family, where + "." + key));
  }
  return {};
}

Result<uint16_t> port_of(const json::Value& e, std::string_view key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_int(e, key, where, true));
  if (!v) return fail(cni_code::kInvalidConfig, where + "." + std::string(key) + " is missing");
  if (*v <= 0 || *v > 65535) {
    return fail(cni_code::kInvalidConfig, where + "." + std::string(key) + " " + std::to_string(*v) + " is not a port number (1..65535)");
  }
  return static_cast<uint16_t>(*v);
}

Result<PortmapConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  PortmapConfig c;
  const std::string where = in.network + " portmap";
  c.snat = PLUMB_TRY(json::get_bool(conf, "snat", where)).value_or(true);
  c.masq_all = PLUMB_TRY(json::get_bool(conf, "masqAll", where)).value_or(false);
  auto bit = PLUMB_TRY(json::get_int(conf, "markMasqBit", where));
  const json::Value* external = json::find(conf, "externalSetMarkChain");
  if (bit && external != nullptr) {
    return fail(cni_code::kInvalidConfig, where + ": externalSetMarkChain and markMasqBit cannot both be set");
  }
  if (bit && (*bit < 0 || *bit > 31)) {
    return fail(cni_code::kInvalidConfig, where + ".markMasqBit " + std::to_string(*bit) + " must be between 0 and 31");
  }
  if (external != nullptr) {
    return fail(cni_code::kUnsupportedField,
                where + ".externalSetMarkChain " + json::quote(*external) +
                    ": plumb's portmap uses no iptables mark chain (masquerading is decided by nftables sets in "
                    "table inet plumb); remove the key");
  }
  PLUMB_TRY(parse_all_conditions(conf, where, c));

  const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where));
  const json::Value* pms = rc ? PLUMB_TRY(json::get_array(*rc, "portMappings", where + ".runtimeConfig", true)) : nullptr;
  if (pms == nullptr) return c;
  for (rapidjson::SizeType i = 0; i < pms->Size(); ++i) {
    const std::string w = where + ".runtimeConfig.portMappings[" + std::to_string(i) + "]";
    const json::Value& e = (*pms)[i];
    if (!e.IsObject()) return fail(cni_code::kInvalidConfig, w + " is not an object");
    Entry en;
    en.host_port = PLUMB_TRY(port_of(e, "hostPort", w));
    en.container_port = PLUMB_TRY(port_of(e, "containerPort", w));
    auto proto = PLUMB_TRY(json::get_string(e, "protocol", w, true)).value_or("");
    if (proto.empty() || strcasecmp(proto.c_str(), "tcp") == 0) {
      en.l4proto = IPPROTO_TCP;
    } else if (strcasecmp(proto.c_str(), "udp") == 0) {
      en.l4proto = IPPROTO_UDP;
    } else if (strcasecmp(proto.c_str(), "sctp") == 0) {
      en.l4proto = IPPROTO_SCTP;
    } else {
      return fail(cni_code::kInvalidConfig, w + ".protocol \"" + proto + "\" must be tcp, udp or sctp");
    }
    auto host_ip = PLUMB_TRY(json::get_string(e, "hostIP", w, true)).value_or("");
    if (!host_ip.empty()) {
      auto a = IpAddr::parse(host_ip);
      if (!a) return fail(cni_code::kInvalidConfig, w + ".hostIP \"" + host_ip + "\" is not an IP address");
      en.host_family = a->family;
      const bool unspecified = std::all_of(a->bytes.begin(), a->bytes.end(), [](uint8_t b) { return b == 0; });
      if (!unspecified) en.host_ip = *a;
    }
    // Identical entries (e.g. the same port listed by two containers of the pod) are one mapping.
    auto same = [&](const Entry& o) {
      return o.l4proto == en.l4proto && o.host_port == en.host_port && o.host_ip == en.host_ip &&
             o.host_family == en.host_family;
    };
    auto dup = std::find_if(c.entries.begin(), c.entries.end(), same);
    if (dup != c.entries.end()) {
      if (dup->container_port == en.container_port) continue;
      return fail(cni_code::kInvalidConfig, w + " maps host port " + std::to_string(en.host_port) +
                                                " again, to container port " + std::to_string(en.container_port) +
                                                " instead of " + std::to_string(dup->container_port));
    }
    c.entries.push_back(en);
  }
  return c;
}

/// The first IPv4 and first IPv6 address of the attachment's pod interface (reference
/// parseConfig: addresses of other or host-side interfaces are skipped).
std::vector<IpAddr> pod_addresses(const Context& ctx, const cni::CniResult& prev) {
  std::optional<IpAddr> v4, v6;
  for (const auto& ip : prev.ips) {
    if (ip.interface) {
      const int i = *ip.interface;
      if (i >= 0 && static_cast<size_t>(i) < prev.interfaces.size() &&
          (prev.interfaces[i].name != ctx.ifname || prev.interfaces[i].sandbox.empty())) {
        continue;
      }
    }
    auto& slot = ip.address.addr.is_v4() ? v4 : v6;
    if (!slot) slot = ip.address.addr;
  }
  std::vector<IpAddr> out;
  if (v4) out.push_back(*v4);
  if (v6) out.push_back(*v6);
  return out;
}

/// Everything the attachment maps, as the engine takes it.
nft::PodPortMappings plan(const Context& ctx, const PortmapConfig& c, const std::vector<IpAddr>& pods) {
  nft::PodPortMappings pm;
  pm.container_id = ctx.container_id;
  pm.ifname = ctx.ifname;
  for (const IpAddr& pod : pods) {
    bool any = false;
    const nft::Conditions& cond = pod.is_v4() ? c.cond4 : c.cond6;
    for (const Entry& e : c.entries) {
      if (e.host_family != 0 && e.host_family != pod.family) continue;  // wrong-family hostIP: skipped
      pm.mappings.push_back({e.l4proto, e.host_ip, e.host_port, pod, e.container_port, cond.class_name()});
      any = true;
    }
    if (!any) continue;
    if (!cond.matches.empty()) pm.conditions.push_back(cond);
    if (c.snat) pm.snat_pods.push_back(pod);
    if (c.snat && c.masq_all) pm.masq_all_pods.push_back(pod);
  }
  return pm;
}

/// route_localnet=1 on the attachment's host-side interfaces (those of prevResult without a
/// sandbox that exist in the node): DNATed 127.0.0.1 traffic leaves through them. Its previous
/// value comes back only when the ADD is rolled back: a completed attachment's bridge is shared,
/// its veth dies with it.
Status enable_localnet(Context& ctx, const cni::CniResult& prev) {
  for (const auto& i : prev.interfaces) {
    if (!i.sandbox.empty() || i.name.empty()) continue;
    auto l = PLUMB_TRY(link::get(*ctx.node, i.name));
    if (!l) continue;
    auto st = steps::run(ctx, steps::WriteNodeSysctl{"net/ipv4/conf/" + i.name + "/route_localnet", "1"});
    if (!st) return std::unexpected(st.error().within("portmap: allow 127.0.0.1 host ports through " + i.name));
  }
  return {};
}

/// Conntrack filters for UDP flows to the host ports of pm: entries to a local address (or the
/// mapping's host address) that predate the mapping.
Result<std::vector<nft::conntrack::Filter>> stale_udp_filters(Context& ctx, const nft::PodPortMappings& pm) {
  std::vector<nft::conntrack::Filter> out;
  std::vector<IpAddr> local4, local6;
  bool listed = false;
  for (const auto& m : pm.mappings) {
    if (m.l4proto != IPPROTO_UDP) continue;
    if (!listed) {
      for (const auto& a : PLUMB_TRY(addr::list(*ctx.node))) (a.prefix.addr.is_v4() ? local4 : local6).push_back(a.prefix.addr);
      listed = true;
    }
    nft::conntrack::Filter f;
    f.family = m.pod_ip.family;
    f.l4proto = IPPROTO_UDP;
    f.orig_dport = m.host_port;
    f.orig_dst = m.host_ip ? std::vector<IpAddr>{*m.host_ip} : (m.pod_ip.is_v4() ? local4 : local6);
    out.push_back(std::move(f));
  }
  return out;
}

/// Conntrack filters for the pod's own UDP flows through its host ports.
std::vector<nft::conntrack::Filter> pod_udp_filters(const std::vector<nft::PortMapping>& maps) {
  std::vector<nft::conntrack::Filter> out;
  for (const auto& m : maps) {
    if (m.l4proto != IPPROTO_UDP) continue;
    nft::conntrack::Filter f;
    f.family = m.pod_ip.family;
    f.l4proto = IPPROTO_UDP;
    f.orig_dport = m.host_port;
    if (m.host_ip) f.orig_dst = {*m.host_ip};
    f.reply_src = m.pod_ip;
    f.reply_sport = m.container_port;
    out.push_back(std::move(f));
  }
  return out;
}

Result<cni::CniResult> portmap_add(Context& ctx, const PortmapConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) {
    return fail(cni_code::kInvalidConfig, ctx.network + " portmap: must be chained after a plugin that gives the pod "
                                                        "its addresses (no prevResult)");
  }
  if (c.entries.empty()) return *prev;
  const std::vector<IpAddr> pods = pod_addresses(ctx, *prev);
  if (pods.empty()) {
    return fail(cni_code::kInvalidConfig, ctx.network + " portmap: prevResult has no address on interface " + ctx.ifname +
                                              " to forward host ports to");
  }
  nft::PodPortMappings pm = plan(ctx, c, pods);
  if (pm.mappings.empty()) return *prev;  // every hostIP of the other family

  if (c.snat && std::any_of(pods.begin(), pods.end(), [](const IpAddr& a) { return a.is_v4(); })) {
    PLUMB_TRY(enable_localnet(ctx, *prev));
  }
  auto filters = PLUMB_TRY(stale_udp_filters(ctx, pm));
  PLUMB_TRY(steps::run(ctx, steps::AddPortMappings{pm}));
  // Flows that reached these UDP ports before (the node itself, a previous owner) would keep
  // their old binding: flush them now that new flows are DNATed.
  auto flushed = steps::run(ctx, steps::FlushConntrack{std::move(filters)});
  if (!flushed) return std::unexpected(flushed.error().within(ctx.network + " portmap: flush stale UDP flows"));
  return *prev;
}

Status portmap_check(Context& ctx, const PortmapConfig& c, const cni::CniResult& prev) {
  if (c.entries.empty()) return {};
  nft::PodPortMappings pm = plan(ctx, c, pod_addresses(ctx, prev));
  return nft::check_port_mappings(pm);
}

}  // namespace

const Driver kPortmap = make_driver<PortmapConfig, parse_config, portmap_add, portmap_check>("portmap");

namespace undo {

Status run_op(Context&, const PortmapRemove& op) {
  const nft::PodPortMappings& pm = op.pm;
  auto removed = nft::remove_port_mappings(pm);
  if (!removed) return std::unexpected(removed.error().within("undo"));
  // The pod's UDP flows through its host ports (only those DNATed to this pod's address: another
  // pod's flows are never touched).
  auto flushed = nft::conntrack::remove_matching(pod_udp_filters(pm.mappings));
  if (!flushed) return std::unexpected(flushed.error().within("undo portmap.remove: flush UDP flows of container " + pm.container_id));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
