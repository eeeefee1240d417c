// The reference portmap plugin's conditionsV4 / conditionsV6: extra matches a packet must pass
// before a pod's host ports are DNATed to it. The reference appends them verbatim to its
// iptables rules (iptables backend) or its nftables rules (nftables backend); plumb parses a
// subset of either syntax into nftables expressions and refuses every other token by name:
//
//   iptables syntax (first token starts with '-' or '!'):
//     [!] -s|--source|--src <addr>[/<len>]      [!] -d|--destination|--dst <addr>[/<len>]
//     [!] -i|--in-interface <name>[+]           [!] -p|--protocol tcp|udp|sctp
//     -m addrtype [!] --dst-type|--src-type <TYPE>   (one of UNICAST LOCAL BROADCAST ANYCAST
//                                                     MULTICAST BLACKHOLE UNREACHABLE PROHIBIT)
//     -m comment --comment <text>               (ignored)
//   nftables syntax:
//     ip|ip6 saddr|daddr [!=] <addr>[/<len>]    [meta] iifname [!=] <name>[*]
//     meta l4proto [!=] tcp|udp|sctp            fib saddr|daddr type [!=] <type>
//
// -o/--out-interface is refused: host ports are DNATed in prerouting/output, before routing
// chooses the output interface. Tokens may be given one per list element or space-separated.
// How they apply in plumb's design (engine/nft/portmap.hpp): mappings with conditions go to
// DNAT maps of their own condition class ("portmap4-c<hash>"), looked up by one rule carrying
// the conditions' expressions; the class is created once per distinct condition list, so the
// ruleset grows with distinct conditions, not with pods.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <libnftnl/rule.h>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

namespace plumb::nft {

/// One parsed match.
struct Match {
  enum class Kind { Saddr, Daddr, Iifname, L4proto, FibSaddrType, FibDaddrType };
  Kind kind = Kind::Daddr;
  bool negate = false;
  IpPrefix prefix;        ///< Saddr, Daddr
  std::string name;       ///< Iifname ('+' suffix: a prefix match)
  uint8_t l4proto = 0;    ///< L4proto
  uint32_t rtn_type = 0;  ///< FibSaddrType, FibDaddrType: RTN_LOCAL ...
};

/// The conditions of one family, parsed.
struct Conditions {
  int family = 0;               ///< AF_INET (conditionsV4) or AF_INET6 (conditionsV6)
  std::vector<Match> matches;   ///< empty: no conditions
  std::string text;             ///< the normalised token list (what the class name hashes)
  /// "" without matches, else "c" + 8 hex digits of a hash of the family and text.
  [[nodiscard]] std::string class_name() const;
};

/// "iptables" when the first token starts with '-' or '!', "nftables" otherwise, "" when empty
/// (the reference's detectBackendOfConditions).
[[nodiscard]] std::string conditions_syntax(const std::vector<std::string>& tokens);

/// Parses conditionsV4 (family AF_INET) or conditionsV6. `key` ("net.conditionsV4") starts every
/// message. Errors: kUnsupportedField naming the first token plumb cannot express; kInvalidConfig
/// for a malformed value (an address of the other family, a missing argument).
[[nodiscard]] Result<Conditions> parse_conditions(const std::vector<std::string>& tokens, int family, const std::string& key);

/// Appends the expressions of `c` to a rule.
void append_conditions(nftnl_rule* r, const Conditions& c);

}  // namespace plumb::nft
