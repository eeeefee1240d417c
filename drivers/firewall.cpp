// The reference "firewall" chained plugin, natively, with its rules in plumb's nftables table
// (engine/nft/firewall.hpp): the attachment's addresses (every address of prevResult, as the
// reference) are admitted in the forward hook (traffic from them, and established/related
// traffic to them), after the isolation chain and the administrator's chain; DEL removes them.
// Keys (as the reference):
//   backend                 "iptables" (the reference's default when firewalld is not running)
//                           or absent: plumb's nftables table; "firewalld" is refused (code 2:
//                           plumb does not drive firewalld over D-Bus); firewalldZone is then
//                           meaningless and ignored.
//   iptablesAdminChainName  the administrator's chain (default CNI-ADMIN), created empty in table
//                           inet plumb and jumped to before the admit rules.
//   ingressPolicy           "open" (default): nothing more; "same-bridge": the bridge of
//                           prevResult.interfaces[0] joins the isolation sets, so traffic
//                           routed between two such bridges is dropped; "isolated": also traffic
//                           from that bridge to itself (seen in the forward hook only with
//                           br_netfilter). Each attachment claims the bridge's isolation; its
//                           DEL (or rollback) takes the bridge out of the sets once no other
//                           attachment claims them (the reference leaves them for good).
#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/nft/firewall.hpp"

namespace plumb::drivers {
namespace {

/// The firewall plugin's configuration, validated.
struct FirewallConfig : Config {
  std::string admin_chain = nft::kFirewallAdminChain;
  std::string ingress_policy = "open";
};

Result<FirewallConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  FirewallConfig c;
  const std::string where = in.network + " firewall";
  if (auto b = PLUMB_TRY(json::get_string(conf, "backend", where)); b && !b->empty()) {
    if (*b == "firewalld") {
      return fail(cni_code::kUnsupportedField, where + ".backend \"firewalld\": plumb does not drive firewalld (D-Bus); "
                                                       "use \"iptables\" or leave it out (plumb's nftables table)");
    }
    if (*b != "iptables" && *b != "nftables") {
      return fail(cni_code::kInvalidConfig, where + ".backend \"" + *b + "\" is not a firewall backend (iptables, firewalld)");
    }
  }
  if (auto a = PLUMB_TRY(json::get_string(conf, "iptablesAdminChainName", where)); a && !a->empty()) {
    if (!nft::valid_admin_chain(*a)) {
      return fail(cni_code::kInvalidConfig, where + ".iptablesAdminChainName \"" + *a +
                                                "\" is not a chain name plumb can create (1..200 of [A-Za-z0-9_.-], not "
                                                "firewall-*, portmap-*, masq-* or postrouting)");
    }
    c.admin_chain = *a;
  }
  if (auto p = PLUMB_TRY(json::get_string(conf, "ingressPolicy", where)); p && !p->empty()) {
    if (*p != "open" && *p != "same-bridge" && *p != "isolated") {
      return fail(cni_code::kInvalidConfig, where + ".ingressPolicy: unknown ingress policy: \"" + *p + "\"");
    }
    c.ingress_policy = *p;
  }
  return c;
}

nft::FirewallPod pod_of(const Context& ctx, const FirewallConfig& c, const cni::CniResult& prev) {
  nft::FirewallPod p;
  p.container_id = ctx.container_id;
  p.ifname = ctx.ifname;
  p.admin_chain = c.admin_chain;
  for (auto& ip : prev.ips) p.addresses.push_back(ip.address.addr);
  return p;
}

Result<cni::CniResult> firewall_add(Context& ctx, const FirewallConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) return fail(cni_code::kInvalidConfig, ctx.network + " firewall: missing prevResult from earlier plugin");
  if (c.ingress_policy != "open") {
    if (prev->interfaces.empty() || prev->interfaces[0].name.empty()) {
      return fail(cni_code::kInvalidConfig, ctx.network + " firewall: interface needs to be set for ingress policy \"" +
                                                c.ingress_policy + "\", make sure to chain \"firewall\" plugin with \"bridge\"");
    }
    PLUMB_TRY(steps::run(ctx, steps::IsolateBridge{prev->interfaces[0].name, c.ingress_policy == "isolated",
                                                   ctx.container_id, ctx.ifname}));
  }
  PLUMB_TRY(steps::run(ctx, steps::AddFirewallPod{pod_of(ctx, c, *prev)}));
  return *prev;
}

Status firewall_check(Context& ctx, const FirewallConfig& c, const cni::CniResult& prev) {
  return nft::firewall_check(pod_of(ctx, c, prev));
}

}  // namespace

const Driver kFirewall = make_driver<FirewallConfig, parse_config, firewall_add, firewall_check>("firewall");

namespace undo {

Status run_op(Context&, const FirewallRemove& op) {
  nft::FirewallPod p;
  p.container_id = op.container_id;
  p.ifname = op.ifname;
  p.admin_chain = op.admin_chain;
  p.addresses = op.addresses;
  auto removed = nft::firewall_remove(p);
  if (!removed) return std::unexpected(removed.error().within("undo"));
  return {};
}

Status run_op(Context&, const FirewallReleaseBridge& op) {
  auto released = nft::firewall_release_bridge(op.bridge, op.isolated, nft::owner_tag(op.container_id, op.ifname));
  if (!released) return std::unexpected(released.error().within("undo"));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
