// Builders for the libnftnl objects of plumb's port mappings (engine/nft/portmap.hpp): the DNAT
// maps, the ownership set, the address sets of the masquerade rules, their rules and elements.
// Rules carry the exact expression sequences nft(8) 1.0.6 generates for the rule text quoted
// above each builder, so `nft list table inet plumb` shows that text. Internal to engine/nft;
// exposed for the golden test (tests/engine/nft/portmap_golden_test.cpp).
//
// Element layouts (nft concatenations: every component padded to a multiple of 4 bytes):
//
//   DNAT map key   (any host address):  | l4proto 1 + 3 pad | host port 2 (BE) + 2 pad |      8 B
//   DNAT map key   (one host address):  | l4proto 1 + 3 pad | host addr 4/16 | port 2 + 2 pad | 12/24 B
//   DNAT map data:                      | pod addr 4/16     | container port 2 (BE) + 2 pad | 8/20 B
//   owner set key:  | nfproto 1 + 3 | l4proto 1 + 3 | host addr 16 (v4 mapped ::ffff:a.b.c.d,
//                     :: for any) | host port 2 + 2 | owner tag 16 (15 hex chars + NUL) |     44 B
#pragma once

#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap_conditions.hpp"

namespace plumb::nft::pmobj {

// Object names inside table inet plumb.
inline constexpr const char* kChainDnat = "portmap-dnat";
inline constexpr const char* kChainPrerouting = "portmap-prerouting";
inline constexpr const char* kChainOutput = "portmap-output";
inline constexpr const char* kChainPostrouting = "portmap-postrouting";
inline constexpr const char* kOwners = "portmap-owners";

/// Name of the DNAT map for `family` (AF_INET/AF_INET6), with or without the host address in
/// the key: "portmap4", "portmap4-hostip", "portmap6", "portmap6-hostip"; with a condition class
/// (portmap_conditions.hpp) "portmap4-c1a2b3c4d[-hostip]".
[[nodiscard]] std::string dnat_map_name(int family, bool host_ip, const std::string& condition_class = {});
/// "portmap4-hairpin" / "portmap6-hairpin" (pod . pod pairs), "portmap4-localhost" (v4 only),
/// "portmap4-masqall" / "portmap6-masqall".
[[nodiscard]] std::string hairpin_set_name(int family);
[[nodiscard]] std::string localhost_set_name();
[[nodiscard]] std::string masqall_set_name(int family);

/// `map <name> { type inet_proto . [ipv4_addr|ipv6_addr .] inet_service :
///               ipv4_addr|ipv6_addr . inet_service; }`
[[nodiscard]] obj::Set dnat_map(const std::string& table, int family, bool host_ip, uint32_t set_id,
                                const std::string& condition_class = {});
/// `set portmap-owners { type nf_proto . inet_proto . ipv6_addr . inet_service . ifname; }`
[[nodiscard]] obj::Set owner_set(const std::string& table, uint32_t set_id);
/// `set <name> { type ipv4_addr|ipv6_addr [. ipv4_addr|ipv6_addr]; }` (pair: two addresses).
[[nodiscard]] obj::Set addr_set(const std::string& table, const std::string& name, int family, bool pair,
                                uint32_t set_id);

/// `meta nfproto ipv4 dnat ip to meta l4proto . [ip daddr .] th dport map @<map>` (ip6 for
/// AF_INET6). set_id: the map's id when created in the same batch, else 0.
/// With `conditions`: their expressions first, and the map of their class.
[[nodiscard]] obj::Rule dnat_rule(const std::string& table, const std::string& chain, int family, bool host_ip,
                                  uint32_t set_id, const Conditions* conditions = nullptr);
/// `fib daddr type local jump <target>`.
[[nodiscard]] obj::Rule local_jump_rule(const std::string& table, const std::string& chain, const std::string& target);
/// `ct status dnat ip saddr . ip daddr @<set> masquerade` (ip6 for AF_INET6): hairpin.
[[nodiscard]] obj::Rule masq_hairpin_rule(const std::string& table, const std::string& chain, int family,
                                          uint32_t set_id);
/// `ct status dnat ip saddr 127.0.0.0/8 ip daddr @portmap4-localhost masquerade`.
[[nodiscard]] obj::Rule masq_localhost_rule(const std::string& table, const std::string& chain, uint32_t set_id);
/// `ct status dnat ip daddr @<masqall set> masquerade` (ip6 for AF_INET6).
[[nodiscard]] obj::Rule masq_all_rule(const std::string& table, const std::string& chain, int family,
                                      uint32_t set_id);

/// Key of a DNAT map element; host_ip empty for the any-address map. Ports in host order.
[[nodiscard]] std::vector<uint8_t> dnat_key(uint8_t l4proto, const std::optional<IpAddr>& host_ip, uint16_t host_port);
/// Data of a DNAT map element.
[[nodiscard]] std::vector<uint8_t> dnat_data(const IpAddr& pod, uint16_t container_port);
/// Key of an owner set element. owner_tag: at most 15 characters (see portmap.hpp owner_tag()).
[[nodiscard]] std::vector<uint8_t> owner_key(int family, uint8_t l4proto, const std::optional<IpAddr>& host_ip,
                                             uint16_t host_port, const std::string& owner_tag);
/// Key of an address set element (pair: the address twice, for the hairpin sets).
[[nodiscard]] std::vector<uint8_t> addr_key(const IpAddr& a, bool pair);

/// A set reference (table + name) for NEWSETELEM/DELSETELEM/GETSETELEM, without elements.
[[nodiscard]] obj::Set set_ref(const std::string& table, const std::string& name);
/// Appends one element to `s`: key, optional map data, optional comment (stored as nft's element
/// comment user data, cut to 127 bytes).
void add_element(nftnl_set* s, const std::vector<uint8_t>& key, const std::vector<uint8_t>& data = {},
                 const std::string& comment = {});
/// The comment user data of an element ("" if none).
[[nodiscard]] std::string element_comment(nftnl_set_elem* e);

}  // namespace plumb::nft::pmobj
