// Host port mappings (the reference "portmap" plugin's job) in plumb's table `inet plumb`:
// DNAT through maps, so adding or removing a pod's mappings is element adds/deletes in one atomic
// nftables transaction; the ruleset never grows with pods and the lookup is O(1) per packet.
//
//   table inet plumb {
//     map portmap4        { type inet_proto . inet_service : ipv4_addr . inet_service; }
//     map portmap4-hostip { type inet_proto . ipv4_addr . inet_service : ipv4_addr . inet_service; }
//     map portmap6 / portmap6-hostip            (the same with ipv6_addr)
//     set portmap-owners  { type nf_proto . inet_proto . ipv6_addr . inet_service . ifname; }
//     set portmap4-hairpin { type ipv4_addr . ipv4_addr; }   # pod . pod, for pods with snat
//     set portmap6-hairpin { type ipv6_addr . ipv6_addr; }
//     set portmap4-localhost { type ipv4_addr; }             # pods with snat (127.0.0.1 works)
//     set portmap4-masqall / portmap6-masqall                # pods with masqAll
//     chain portmap-dnat {
//       meta nfproto ipv4 dnat ip to meta l4proto . ip daddr . th dport map @portmap4-hostip
//       meta nfproto ipv4 dnat ip to meta l4proto . th dport map @portmap4
//       meta nfproto ipv6 dnat ip6 to meta l4proto . ip6 daddr . th dport map @portmap6-hostip
//       meta nfproto ipv6 dnat ip6 to meta l4proto . th dport map @portmap6
//     }
//     chain portmap-prerouting { type nat hook prerouting priority dstnat; policy accept;
//       fib daddr type local jump portmap-dnat }          # traffic from other hosts and pods
//     chain portmap-output { type nat hook output priority -100; policy accept;   # (dstnat)
//       fib daddr type local jump portmap-dnat }          # traffic from the node itself
//     chain portmap-postrouting { type nat hook postrouting priority srcnat; policy accept;
//       ct status dnat ip saddr . ip daddr @portmap4-hairpin masquerade
//       ct status dnat ip6 saddr . ip6 daddr @portmap6-hairpin masquerade
//       ct status dnat ip saddr 127.0.0.0/8 ip daddr @portmap4-localhost masquerade
//       ct status dnat ip daddr @portmap4-masqall masquerade
//       ct status dnat ip6 daddr @portmap6-masqall masquerade
//     }
//   }
//
// Ownership. Every mapping also adds `nfproto . l4proto . host address . host port . owner tag`
// to portmap-owners, where the tag is a hash of "<containerID>/<ifname>" (owner_tag()); the DNAT
// element carries "<containerID>/<ifname>" as its comment. Adding uses NLM_F_EXCL on both, so a
// host port already taken fails the whole transaction with EEXIST and the owner is read back
// from the element's comment (kernel state, so it can never disagree with what is installed).
// Removing deletes the owner element and the DNAT element in one transaction: if the owner
// element is not ours the kernel answers ENOENT and nothing is deleted. So a DEL (or the rollback
// of an ADD that lost the race for a port) can never remove another pod's mapping: an atomic
// compare-and-delete, without a lock or a state file.
//
// A mapping with a host address takes precedence over one without for that address (rule order).
// IPv6 has no equivalent of route_localnet: [::1]:port is not forwarded (as the reference plugin).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/nft/portmap_conditions.hpp"

namespace plumb::nft {

/// One host port forwarded to one pod address.
struct PortMapping {
  uint8_t l4proto = 0;            ///< IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP
  std::optional<IpAddr> host_ip;  ///< nullopt: every local address of pod_ip's family
  uint16_t host_port = 0;         ///< 1..65535
  IpAddr pod_ip;                  ///< its family selects the map (and host_ip must match it)
  uint16_t container_port = 0;    ///< 1..65535
  std::string condition_class;    ///< Conditions::class_name() of its family's conditions ("" = none)
};

/// The mappings of one attachment, added and removed as one unit.
struct PodPortMappings {
  std::string container_id;            ///< owner, with ifname
  std::string ifname;
  std::vector<PortMapping> mappings;
  std::vector<IpAddr> snat_pods;       ///< masquerade hairpin (and, IPv4, 127.0.0.0/8) traffic to these
  std::vector<IpAddr> masq_all_pods;   ///< masquerade every DNATed connection to these
  /// The condition classes the mappings use (portmap_conditions.hpp): each gets its maps and its
  /// DNAT rule once. Mappings of a class are looked up after the unconditioned ones.
  std::vector<Conditions> conditions;
};

/// The owner tag stored in portmap-owners: 15 hex digits of a 64-bit FNV-1a hash of
/// "<container_id>/<ifname>".
[[nodiscard]] std::string owner_tag(const std::string& container_id, const std::string& ifname);
/// "tcp", "udp", "sctp" (or the number).
[[nodiscard]] std::string l4proto_name(uint8_t l4proto);
/// "tcp host port 8080 on 198.51.100.1" / "... on every IPv4 address" (for messages).
[[nodiscard]] std::string describe(const PortMapping& m);

/// Installs the table's port-mapping objects if needed (one transaction, race-free), then adds
/// every element of `pm` in one atomic transaction. Errors: kInvalidConfig for invalid values or
/// two mappings of `pm` with the same (family, protocol, host address, host port); kConflict
/// when a host port is taken, naming the port, the owner's container ID and interface and its
/// pod address; kKernelFeature when the kernel lacks nf_tables NAT, fib, ct or masquerade;
/// kKernel with the kernel's errno and extended-ack text otherwise.
[[nodiscard]] Status add_port_mappings(const PodPortMappings& pm);

/// What remove_port_mappings() did.
struct PortMapRemoval {
  std::vector<PortMapping> removed;    ///< mappings that were ours and are gone now
  std::vector<PortMapping> not_owned;  ///< absent, or owned by someone else: left alone
};

/// Removes the elements of `pm` that it owns (see Ownership above), and its pod addresses from the
/// masquerade sets. Idempotent: a missing table, map or element is not an error.
/// Errors: kKernelFeature / kKernel as for add_port_mappings.
[[nodiscard]] Result<PortMapRemoval> remove_port_mappings(const PodPortMappings& pm);

/// The installed DNAT element for a host port, if any.
struct PortMapTarget {
  IpAddr pod_ip;
  uint16_t container_port = 0;
  std::string owner;  ///< the element's comment: "<containerID>/<ifname>"
};

/// Reads the DNAT element for (family of `family`, l4proto, host_ip, host_port).
/// Returns nullopt when there is none (or no table). Errors: kKernel.
[[nodiscard]] Result<std::optional<PortMapTarget>> find_port_mapping(int family, uint8_t l4proto,
                                                                     const std::optional<IpAddr>& host_ip,
                                                                     uint16_t host_port, const std::string& condition_class = {});

/// CNI CHECK: every mapping of `pm` is installed, points to its pod address and port, and is owned
/// by pm's container and interface. Errors: kKernel naming the first mapping that differs.
[[nodiscard]] Status check_port_mappings(const PodPortMappings& pm);

}  // namespace plumb::nft
