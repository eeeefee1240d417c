// Builders for the libnftnl objects plumb sends: the table, chains, verdict maps, map elements and
// rules, with the exact expression sequences nft(8) 1.0.6 generates for the same rule text (so
// `nft list` decodes them back to that text). Internal to engine/nft; exposed for the golden test.
#pragma once

#include <linux/netfilter.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/base/ip.hpp"

namespace plumb::nft::obj {

struct TableFree {
  void operator()(nftnl_table* t) const { nftnl_table_free(t); }
};
struct ChainFree {
  void operator()(nftnl_chain* c) const { nftnl_chain_free(c); }
};
struct RuleFree {
  void operator()(nftnl_rule* r) const { nftnl_rule_free(r); }
};
struct SetFree {
  void operator()(nftnl_set* s) const { nftnl_set_free(s); }
};
using Table = std::unique_ptr<nftnl_table, TableFree>;
using Chain = std::unique_ptr<nftnl_chain, ChainFree>;
using Rule = std::unique_ptr<nftnl_rule, RuleFree>;
using Set = std::unique_ptr<nftnl_set, SetFree>;

/// Family of every object plumb owns: NFPROTO_INET (one table for IPv4 and IPv6).
inline constexpr uint16_t kFamily = NFPROTO_INET;

/// The table `inet <name>` (no attributes besides its name).
[[nodiscard]] Table table(const std::string& name);

/// A base chain: `type <type> hook <hooknum> priority <prio>; policy accept;`.
/// hooknum is an NF_INET_* hook number.
[[nodiscard]] Chain base_chain(const std::string& table, const std::string& name, const std::string& type,
                               uint32_t hooknum, int32_t prio);
/// A regular chain (target of jumps) or a chain reference (for flush/delete: name only).
[[nodiscard]] Chain chain(const std::string& table, const std::string& name);

/// A verdict map `map <name> { type ipv4_addr|ipv6_addr : verdict; }` keyed by addresses of
/// `family` (AF_INET or AF_INET6). set_id lets rules of the same batch refer to it.
[[nodiscard]] Set verdict_map(const std::string& table, const std::string& name, int family, uint32_t set_id);

/// A set reference carrying one element `key : jump <target_chain>` (for NEWSETELEM), or with an
/// empty target_chain the bare key (for DELSETELEM).
[[nodiscard]] Set map_element(const std::string& table, const std::string& map, const IpAddr& key,
                              const std::string& target_chain);

/// `ip saddr vmap @map` (family AF_INET) or `ip6 saddr vmap @map` (AF_INET6), appended to chain.
/// set_id: the id the map was given when created in the same batch (0 if it was not).
[[nodiscard]] Rule saddr_vmap_rule(const std::string& table, const std::string& chain, int family,
                                   const std::string& map, uint32_t set_id);
/// `ip daddr <prefix> return` / `ip6 daddr <prefix> return` (host bits of prefix are ignored).
[[nodiscard]] Rule daddr_return_rule(const std::string& table, const std::string& chain, const IpPrefix& prefix);
/// `masquerade`.
[[nodiscard]] Rule masquerade_rule(const std::string& table, const std::string& chain);
/// A rule reference without handle: DELRULE with it flushes every rule of the chain.
[[nodiscard]] Rule chain_rules(const std::string& table, const std::string& chain);

/// The expressions of a rule in libnftnl's debug notation, one "[ ... ]" per line, as printed by
/// `nft --debug=netlink` (used by the golden test).
[[nodiscard]] std::string expr_text(const nftnl_rule* rule);

}  // namespace plumb::nft::obj
