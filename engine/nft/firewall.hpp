// The reference "firewall" plugin's rules (its iptables backend: CNI-FORWARD, CNI-ADMIN and the
// ingress-policy isolation chains) in plumb's table `inet plumb`, per pod one element per
// address, so the ruleset does not grow with pods:
//
//   table inet plumb {
//     set firewall4 { type ipv4_addr; }              # admitted pod addresses (comment: owner)
//     set firewall6 { type ipv6_addr; }
//     set firewall-owners { type ipv6_addr . ifname; }  # address (v4 mapped) . owner tag
//     set firewall-bridges { type ifname; }          # bridges with ingressPolicy same-bridge|isolated
//     set firewall-bridge-pairs { type ifname . ifname; }     # br . br of those
//     set firewall-isolated-pairs { type ifname . ifname; }   # br . br of the isolated ones
//     set firewall-bridge-owners { type ifname . ifname; }    # br . owner tag: who needs br isolated
//     set firewall-isolated-owners { type ifname . ifname; }  # br . owner tag of the isolated ones
//     chain firewall-forward { type filter hook forward priority filter; policy accept;
//       jump firewall-isolation                       # the reference's CNI-ISOLATION-STAGE-1 first
//       jump firewall-admin                           # then the admin chains (CNI-ADMIN)
//       ip daddr @firewall4 ct state established,related accept
//       ip saddr @firewall4 accept
//       ip6 daddr @firewall6 ct state established,related accept
//       ip6 saddr @firewall6 accept
//     }
//     chain firewall-isolation {
//       meta iifname . meta oifname @firewall-isolated-pairs drop   # isolated: br -> same br
//       meta iifname . meta oifname @firewall-bridge-pairs return   # within one bridge: fine
//       meta iifname @firewall-bridges meta oifname @firewall-bridges drop  # bridge -> other bridge
//     }
//     chain firewall-admin { jump CNI-ADMIN; ... }    # one jump per admin chain name in use
//     chain CNI-ADMIN { }                             # the administrator's overrides, created empty
//   }
//
// An accept in this table ends evaluation of this table only: nftables runs every table's base
// chains, so a drop elsewhere (an iptables FORWARD policy DROP) still drops. The reference inserts
// its rules into iptables' FORWARD chain itself; plumb changes no table but its own.
// Ownership: as port mappings (portmap.hpp), an address element is added together with its
// owner element (NLM_F_EXCL on both) and removed only together with it.
#pragma once

#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

namespace plumb::nft {

/// The reference's default admin chain name.
inline constexpr const char* kFirewallAdminChain = "CNI-ADMIN";

/// One attachment's addresses, admitted and removed as one unit.
struct FirewallPod {
  std::string container_id;       ///< owner, with ifname
  std::string ifname;
  std::vector<IpAddr> addresses;
  std::string admin_chain = kFirewallAdminChain;  ///< iptablesAdminChainName
};

/// A chain name the administrator may own in table inet plumb: 1..200 characters of
/// [A-Za-z0-9_.-], not one of plumb's own prefixes (firewall-, portmap-, masq-) or "postrouting".
[[nodiscard]] bool valid_admin_chain(const std::string& name);

/// Installs the table's firewall objects if needed (one transaction, race-free), the admin chain
/// and its jump if new, then adds every address of `pod` in one atomic transaction.
/// Errors: kInvalidConfig for an invalid admin chain name or address; kConflict when an address
/// is admitted for another attachment (naming its owner); kKernelFeature when the kernel lacks
/// nf_tables filter chains, ct or lookup expressions; kKernel otherwise.
[[nodiscard]] Status firewall_add(const FirewallPod& pod);

/// ingressPolicy same-bridge (isolated = false) or isolated: adds `bridge` to the isolation sets
/// and the claim of attachment `owner` (owner_tag() of its container and interface) on them, in
/// one transaction (idempotent). Errors: kInvalidConfig for an invalid bridge name; the kernel's.
[[nodiscard]] Status firewall_isolate_bridge(const std::string& bridge, bool isolated, const std::string& owner);

/// The inverse of firewall_isolate_bridge for `owner`: drops its claims, then takes `bridge` out
/// of the sets no other attachment's claim still needs (the isolated pairs once no isolated
/// attachment claims the bridge, the rest once none does); a concurrent isolate of the same
/// bridge gets its elements back. Idempotent: missing table, sets or elements are fine. Errors:
/// kInvalidConfig for an invalid bridge name; the kernel's.
[[nodiscard]] Status firewall_release_bridge(const std::string& bridge, bool isolated, const std::string& owner);

/// Removes the addresses of `pod` it owns. Idempotent: missing table, sets or elements are fine.
/// Returns how many addresses were removed.
[[nodiscard]] Result<size_t> firewall_remove(const FirewallPod& pod);

/// CNI CHECK: every address is admitted for this attachment, and the forward chain exists.
/// Errors: kKernel naming what is missing.
[[nodiscard]] Status firewall_check(const FirewallPod& pod);

}  // namespace plumb::nft
