// Typed route operations over rtnetlink (RTM_NEWROUTE/DELROUTE/GETROUTE).
#pragma once

#include <linux/rtnetlink.h>

#include <optional>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::route {

struct Route {
  IpPrefix dst;                     // 0.0.0.0/0 or ::/0 for a default route
  std::optional<IpAddr> gw;         // RTA_GATEWAY
  int oif = 0;                      // RTA_OIF, 0 if unset
  uint32_t table = RT_TABLE_MAIN;   // RTA_TABLE
  uint32_t priority = 0;            // RTA_PRIORITY (metric)
  uint8_t scope = RT_SCOPE_UNIVERSE;// RT_SCOPE_LINK when no gateway and a device is given
  uint8_t protocol = RTPROT_BOOT;
  uint8_t type = RTN_UNICAST;
  std::optional<IpAddr> prefsrc;    // RTA_PREFSRC
  uint32_t mtu_bytes = 0;           // RTAX_MTU in RTA_METRICS, 0 if unset
  bool is_default() const { return dst.len == 0; }
};

/// Adds a route with NLM_F_CREATE|NLM_F_EXCL. Errors: EEXIST, ENETUNREACH (gateway not on link).
[[nodiscard]] Status add(netlink::Socket& nl, const Route& r);
[[nodiscard]] netlink::Message build_add(const Route& r);
/// Deletes the route matching dst/gw/oif/table/priority. Returns false if it did not exist (ESRCH).
[[nodiscard]] Result<bool> remove(netlink::Socket& nl, const Route& r);
/// Lists routes of `family` (AF_INET or AF_INET6) in `table` (dump filtered in user space;
/// RT_TABLE_UNSPEC: every table).
[[nodiscard]] Result<std::vector<Route>> list(netlink::Socket& nl, int family, uint32_t table = RT_TABLE_MAIN);

}  // namespace plumb::route
