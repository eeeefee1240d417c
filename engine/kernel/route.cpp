#include "engine/kernel/route.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace plumb::route {
namespace {

using netlink::AttrPolicy;
using netlink::Message;

const std::vector<AttrPolicy> kRoutePolicy = {
    {RTA_DST, MNL_TYPE_BINARY, 4},    {RTA_GATEWAY, MNL_TYPE_BINARY, 4}, {RTA_OIF, MNL_TYPE_U32},
    {RTA_PRIORITY, MNL_TYPE_U32},     {RTA_TABLE, MNL_TYPE_U32},         {RTA_PREFSRC, MNL_TYPE_BINARY, 4},
    {RTA_METRICS, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kMetricsPolicy = {
    {RTAX_MTU, MNL_TYPE_U32},
};

std::string describe(const Route& r) {
  std::string s = r.dst.network().str();
  if (r.gw) s += " via " + r.gw->str();
  if (r.oif != 0) s += " dev index " + std::to_string(r.oif);
  if (r.table != RT_TABLE_MAIN) s += " table " + std::to_string(r.table);
  if (r.priority != 0) s += " metric " + std::to_string(r.priority);
  return s;
}

Status check_route(const Route& r, const std::string& what) {
  auto bad = [&](const std::string& field) {
    return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, what + ": invalid " + field, {}});
  };
  int fam = r.dst.addr.family;
  if ((fam != AF_INET && fam != AF_INET6) || r.dst.len > r.dst.max_len()) return bad("destination " + r.dst.str());
  if (r.gw && r.gw->family != fam) return bad("gateway " + r.gw->str() + " (address family differs from destination)");
  if (r.prefsrc && r.prefsrc->family != fam) return bad("preferred source " + r.prefsrc->str());
  return {};
}

void put_rtmsg(Message& m, const Route& r, uint8_t protocol, uint8_t scope, uint8_t type) {
  auto* rtm = m.put_header<rtmsg>();
  rtm->rtm_family = static_cast<uint8_t>(r.dst.addr.family);
  rtm->rtm_dst_len = r.dst.len;
  rtm->rtm_table = static_cast<uint8_t>(r.table < 256 ? r.table : RT_TABLE_UNSPEC);
  rtm->rtm_protocol = protocol;
  rtm->rtm_scope = scope;
  rtm->rtm_type = type;
}

/// RTA_DST | RTA_GATEWAY | RTA_OIF | RTA_PRIORITY — the keys that identify a route.
void put_keys(Message& m, const Route& r) {
  if (r.dst.len > 0) {
    IpPrefix net = r.dst.network();
    m.put(RTA_DST, net.addr.bytes.data(), net.addr.size());
  }
  if (r.gw) m.put(RTA_GATEWAY, r.gw->bytes.data(), r.gw->size());
  if (r.oif != 0) m.put_u32(RTA_OIF, static_cast<uint32_t>(r.oif));
  if (r.priority != 0) m.put_u32(RTA_PRIORITY, r.priority);
}

/// One RTM_NEWROUTE of a dump as a Route; nullopt when it is another family, a cached clone or
/// in another table.
Result<std::optional<Route>> parse_route(const nlmsghdr* nlh, int family, uint32_t table) {
  if (nlh->nlmsg_type != RTM_NEWROUTE) return std::optional<Route>{};
  auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(rtmsg), RTA_MAX, kRoutePolicy));
  const auto* msg = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(nlh));
  if (msg->rtm_family != family || (msg->rtm_flags & RTM_F_CLONED)) return std::optional<Route>{};
  uint32_t t = tb[RTA_TABLE] ? mnl_attr_get_u32(tb[RTA_TABLE]) : msg->rtm_table;
  if (table != RT_TABLE_UNSPEC && t != table) return std::optional<Route>{};
  Route r;
  r.table = t;
  r.dst.addr.family = family;
  r.dst.len = msg->rtm_dst_len;
  if (tb[RTA_DST]) r.dst.addr = PLUMB_TRY(netlink::read_addr(tb[RTA_DST], family));
  if (tb[RTA_GATEWAY]) r.gw = PLUMB_TRY(netlink::read_addr(tb[RTA_GATEWAY], family));
  if (tb[RTA_PREFSRC]) r.prefsrc = PLUMB_TRY(netlink::read_addr(tb[RTA_PREFSRC], family));
  if (tb[RTA_OIF]) r.oif = static_cast<int>(mnl_attr_get_u32(tb[RTA_OIF]));
  if (tb[RTA_PRIORITY]) r.priority = mnl_attr_get_u32(tb[RTA_PRIORITY]);
  if (tb[RTA_METRICS]) {
    auto mx = PLUMB_TRY(netlink::parse_nested(tb[RTA_METRICS], RTAX_MAX, kMetricsPolicy));
    if (mx[RTAX_MTU]) r.mtu_bytes = mnl_attr_get_u32(mx[RTAX_MTU]);
  }
  r.scope = msg->rtm_scope;
  r.protocol = msg->rtm_protocol;
  r.type = msg->rtm_type;
  return std::optional<Route>(r);
}

}  // namespace

// RTM_NEWROUTE, NLM_F_REQUEST|NLM_F_CREATE|NLM_F_EXCL:
//   rtmsg { family, dst_len, src_len 0, tos 0, table (<256, else RT_TABLE_UNSPEC), protocol,
//           scope (RT_SCOPE_LINK when no gateway and an oif), type, flags 0 }
//   [RTA_DST network] [RTA_GATEWAY] [RTA_OIF u32] [RTA_PRIORITY u32] [RTA_PREFSRC]
//   RTA_TABLE u32 | [RTA_METRICS (nested) { RTAX_MTU u32 }]
Message build_add(const Route& r) {
  Message m(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
  uint8_t scope = r.scope;
  if (!r.gw && r.oif != 0 && scope == RT_SCOPE_UNIVERSE) scope = RT_SCOPE_LINK;
  put_rtmsg(m, r, r.protocol, scope, r.type);
  put_keys(m, r);
  if (r.prefsrc) m.put(RTA_PREFSRC, r.prefsrc->bytes.data(), r.prefsrc->size());
  m.put_u32(RTA_TABLE, r.table);
  if (r.mtu_bytes != 0) {
    Message::Nest metrics(m, RTA_METRICS);
    m.put_u32(RTAX_MTU, r.mtu_bytes);
  }
  return m;
}

Status add(netlink::Socket& nl, const Route& r) {
  std::string what = "add route " + describe(r);
  PLUMB_TRY(check_route(r, what));
  Message m = build_add(r);
  return netlink::classify_create(nl.request(m, what));
}

Result<bool> remove(netlink::Socket& nl, const Route& r) {
  std::string what = "delete route " + describe(r);
  PLUMB_TRY(check_route(r, what));
  // Like `ip route del`: scope NOWHERE, protocol and type 0 match any route with these keys.
  Message m(RTM_DELROUTE, 0);
  put_rtmsg(m, r, RTPROT_UNSPEC, RT_SCOPE_NOWHERE, RTN_UNSPEC);
  put_keys(m, r);
  m.put_u32(RTA_TABLE, r.table);
  auto st = nl.request(m, what);
  if (st) return true;
  if (st.error().sys_errno == ESRCH) return false;
  return std::unexpected(st.error());
}

Result<std::vector<Route>> list(netlink::Socket& nl, int family, uint32_t table) {
  if (family != AF_INET && family != AF_INET6) {
    return std::unexpected(
        Error{cni_code::kInternal, EAFNOSUPPORT, "list routes: family " + std::to_string(family) + " is not IPv4/IPv6", {}});
  }
  std::vector<Route> out;
  Message m(RTM_GETROUTE, NLM_F_DUMP);
  auto* rtm = m.put_header<rtmsg>();
  rtm->rtm_family = static_cast<uint8_t>(family);
  PLUMB_TRY(nl.dump(m, "dump routes", [&](const nlmsghdr* nlh) -> Status {
    if (auto r = PLUMB_TRY(parse_route(nlh, family, table))) out.push_back(std::move(*r));
    return {};
  }));
  return out;
}

}  // namespace plumb::route
