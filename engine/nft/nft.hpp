// plumb's nftables layer. plumb owns exactly one table, `inet plumb`, in the node's network
// namespace (the calling thread's current namespace), and changes it only through atomic
// nfnetlink batches (libnftnl objects, libmnl batches; nft(8) is never run).
//
// Layout (masquerade for the bridge driver's `ipMasq`):
//
//   table inet plumb {
//     map masq4 { type ipv4_addr : verdict; }      # pod address -> jump masq-<network>
//     map masq6 { type ipv6_addr : verdict; }
//     chain postrouting {                          # created once, with its two rules
//       type nat hook postrouting priority srcnat; policy accept;
//       ip saddr vmap @masq4
//       ip6 saddr vmap @masq6
//     }
//     chain masq-<network> {                       # one per CNI network, rewritten on each add
//       ip daddr <subnet> return                   # one per subnet of the network (ip6 for v6)
//       ip daddr 224.0.0.0/4 return
//       ip6 daddr ff00::/8 return
//       masquerade
//     }
//   }
//
// Per-pod work is one map element; the rule count does not grow with pods. Port mappings will
// add their own chains and DNAT maps to the same table (not implemented yet).
#pragma once

#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

namespace plumb::nft {

/// Name of the table plumb owns (family inet).
inline constexpr const char* kTableName = "plumb";

/// Name of the per-network chain for CNI network `network`: "masq-" + the name with every
/// character outside [A-Za-z0-9_-] replaced by '_'; if anything was replaced or the name is
/// longer than 200 characters, it is cut to 191 characters and "-" + 8 hex digits of a hash of
/// the original name are appended (at most 200 characters after "masq-").
[[nodiscard]] std::string masq_chain_name(const std::string& network);

/// Makes traffic from `pod_ip` leaving the node masqueraded, except towards `subnets` (the
/// network's own subnets, host bits ignored) and multicast. One nftables transaction ensures
/// the table, maps and postrouting chain (see above; created race-free once), then another
/// rewrites chain masq-<network> (flush + rules) and adds the element `pod_ip : jump
/// masq-<network>` atomically. Idempotent: adding the same pod again changes nothing; a pod
/// address still mapped to another network is re-pointed to this one.
/// Errors: kInvalidConfig for an empty network name or an invalid address/prefix;
/// kKernelFeature when the kernel lacks nf_tables, inet nat chains or the masquerade
/// expression; kKernel with the kernel's errno and extended-ack text otherwise.
[[nodiscard]] Status add_masquerade(const std::string& network, const std::vector<IpPrefix>& subnets,
                                    const IpAddr& pod_ip);

/// Removes the map element of `pod_ip` (masq4 or masq6). Returns true when it was removed,
/// false when it was absent (ENOENT, including when the table or map does not exist).
/// The network chain stays (other pods may use it). Errors: kInvalidConfig for an invalid
/// address; kKernelFeature / kKernel as for add_masquerade.
[[nodiscard]] Result<bool> del_masquerade(const IpAddr& pod_ip);

/// Deletes the whole `inet plumb` table with everything in it (node teardown, tests).
/// A missing table is not an error. Errors: kKernelFeature / kKernel as above.
[[nodiscard]] Status remove_table();

}  // namespace plumb::nft
