// The libnftnl expression and object builders every rule builder of engine/nft shares (portmap,
// firewall, portmap conditions): each appends the expressions nft(8) 1.0.6 generates for the
// rule text quoted in its comment. Internal to engine/nft.
#pragma once

#include <libnftnl/rule.h>
#include <sys/socket.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/nft/objects.hpp"

namespace plumb::nft::expr {

// nft(8) data type numbers (nftables datatype.h); a concatenation's type is the component types
// packed 6 bits each, first component in the most significant position.
inline constexpr uint32_t kTypeNfproto = 2;       // nf_proto
inline constexpr uint32_t kTypeIpv4Addr = 7;      // ipv4_addr
inline constexpr uint32_t kTypeIpv6Addr = 8;      // ipv6_addr
inline constexpr uint32_t kTypeInetProto = 12;    // inet_proto
inline constexpr uint32_t kTypeInetService = 13;  // inet_service
inline constexpr uint32_t kTypeIfname = 41;       // ifname
/// The type of a concatenation of `types`.
[[nodiscard]] uint32_t concat(std::initializer_list<uint32_t> types);
[[nodiscard]] inline uint32_t addr_type(int family) { return family == AF_INET ? kTypeIpv4Addr : kTypeIpv6Addr; }
[[nodiscard]] inline uint32_t addr_len(int family) { return family == AF_INET ? 4 : 16; }

// Offsets in the network header (RFC 791 / RFC 8200).
inline constexpr uint32_t kIpv4Saddr = 12, kIpv4Daddr = 16;
inline constexpr uint32_t kIpv6Saddr = 8, kIpv6Daddr = 24;
/// Interface names in registers and set keys: IFNAMSIZ bytes, NUL padded.
inline constexpr uint32_t kIfnameLen = 16;

/// A new expression (throws std::bad_alloc when libnftnl cannot allocate).
[[nodiscard]] nftnl_expr* make(const char* name);
/// An empty rule of `chain` in table inet `table`.
[[nodiscard]] obj::Rule rule(const std::string& table, const std::string& chain);
/// A set object (family inet) named `name`, without attributes.
[[nodiscard]] obj::Set set(const std::string& table, const std::string& name);

/// [ meta load <key> => reg <dreg> ]
void meta(nftnl_rule* r, uint32_t key, uint32_t dreg);
/// [ cmp <op> reg 1 <data> ]
void cmp(nftnl_rule* r, uint32_t op, const void* data, uint32_t len);
/// [ meta load nfproto => reg 1 ] [ cmp eq reg 1 <nfproto of family> ]: the inet-table guard nft
/// puts in front of every ip/ip6 payload match.
void nfproto_guard(nftnl_rule* r, int family);
/// [ payload load <len>b @ <base> header + <offset> => reg <dreg> ]
void payload(nftnl_rule* r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg);
/// [ lookup reg 1 set <set> [dreg <dreg>] ] (set_id: the set's id when created in the same batch)
void lookup(nftnl_rule* r, const std::string& set, uint32_t set_id, std::optional<uint32_t> dreg, bool invert = false);
/// [ bitwise reg 1 = ( reg 1 & mask ) ^ 0 ] over `len` bytes.
void mask(nftnl_rule* r, const void* mask_bytes, uint32_t len);
/// [ ct load <key> => reg 1 ] [ bitwise reg 1 = ( reg 1 & bits ) ^ 0 ] [ cmp neq reg 1 0 ]:
/// `ct status dnat` (NFT_CT_STATUS, IPS_DST_NAT), `ct state established,related` (NFT_CT_STATE, 0x6).
void ct_bits(nftnl_rule* r, uint32_t key, uint32_t bits);
/// [ immediate reg 0 <verdict> [chain] ] (NF_ACCEPT, NF_DROP, NFT_RETURN, NFT_JUMP ...)
void verdict(nftnl_rule* r, int code, const std::string& chain = {});
/// `ip|ip6 saddr|daddr [!=] <prefix>`: the address loaded (only the prefix's bytes when it ends
/// on a byte boundary, else masked), compared eq/neq.
void addr_match(nftnl_rule* r, int family, bool source, const IpPrefix& prefix, bool negate);
/// `meta iifname|oifname [!=] <name>` (a name ending in '+' matches the prefix, as iptables).
void ifname_match(nftnl_rule* r, bool input, const std::string& name, bool negate);

/// Appends `a`'s bytes (4 or 16).
void put_addr(std::vector<uint8_t>& out, const IpAddr& a);
/// Appends an interface name as a 16-byte NUL-padded field.
void put_ifname(std::vector<uint8_t>& out, const std::string& name);

}  // namespace plumb::nft::expr
