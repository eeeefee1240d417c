// Routing policy rules over rtnetlink (RTM_NEWRULE / RTM_DELRULE / RTM_GETRULE): `ip rule`'s
// "from <addr>/<len> lookup <table>", what the sbr plugin installs in the pod namespace.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::rule {

/// One rule. `src` selects by source prefix (its family is the rule's family); priority 0 on
/// add lets the kernel choose (the one below the lowest existing non-zero priority, as `ip rule
/// add` without "pref").
struct Rule {
  IpPrefix src;                ///< FRA_SRC with rtm src_len; len 0 = "from all"
  uint32_t table = 0;          ///< FRA_TABLE
  uint32_t priority = 0;       ///< FRA_PRIORITY
  uint8_t action = 1;          ///< FR_ACT_TO_TBL
};

/// Adds the rule (NLM_F_CREATE|NLM_F_EXCL). Errors: EEXIST (kConflict) when an identical rule
/// (same priority, selector and table) is there; errno otherwise.
[[nodiscard]] Status add(netlink::Socket& nl, const Rule& r);
[[nodiscard]] netlink::Message build_add(const Rule& r);
/// Deletes the first rule matching src, table and (when non-zero) priority. Returns false when
/// there was none (ENOENT).
[[nodiscard]] Result<bool> remove(netlink::Socket& nl, const Rule& r);
/// Every rule of `family` (AF_INET or AF_INET6).
[[nodiscard]] Result<std::vector<Rule>> list(netlink::Socket& nl, int family);

}  // namespace plumb::rule
