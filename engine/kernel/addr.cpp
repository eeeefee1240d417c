#include "engine/kernel/addr.hpp"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/ipv6.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "engine/kernel/link.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::addr {
namespace {

using netlink::AttrPolicy;
using netlink::Message;

const std::vector<AttrPolicy> kAddrPolicy = {
    {IFA_ADDRESS, MNL_TYPE_BINARY, 4},
    {IFA_LOCAL, MNL_TYPE_BINARY, 4},
    {IFA_FLAGS, MNL_TYPE_U32},
};

Status check_prefix(const IpPrefix& p, const std::string& what) {
  if ((p.addr.family != AF_INET && p.addr.family != AF_INET6) || p.len > p.max_len()) {
    return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, what + ": invalid address \"" + p.str() + "\"", {}});
  }
  return {};
}

/// The address attributes that identify `prefix` (IFA_LOCAL+IFA_ADDRESS for IPv4, IFA_ADDRESS for
/// IPv6), plus IFA_BROADCAST for an IPv4 add when the prefix has a broadcast address (len < 31).
void put_addr(Message& m, const IpPrefix& prefix, bool broadcast) {
  if (prefix.addr.is_v4()) {
    m.put(IFA_LOCAL, prefix.addr.bytes.data(), 4);
    m.put(IFA_ADDRESS, prefix.addr.bytes.data(), 4);
    if (broadcast && prefix.len < 31) m.put(IFA_BROADCAST, prefix.last().bytes.data(), 4);
  } else {
    m.put(IFA_ADDRESS, prefix.addr.bytes.data(), 16);
  }
}

void put_ifaddr(Message& m, int index, const IpPrefix& prefix, uint8_t flags) {
  auto* ifa = m.put_header<ifaddrmsg>();
  ifa->ifa_family = static_cast<uint8_t>(prefix.addr.family);
  ifa->ifa_prefixlen = prefix.len;
  ifa->ifa_flags = flags;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = static_cast<uint32_t>(index);
}

}  // namespace

// RTM_NEWADDR, NLM_F_REQUEST|NLM_F_CREATE|NLM_F_EXCL:
//   ifaddrmsg { family, prefixlen, flags (IFA_F_NODAD if nodad), scope universe, index }
//   IPv4: IFA_LOCAL addr | IFA_ADDRESS addr | [IFA_BROADCAST last address, len < 31] | [IFA_FLAGS]
//   IPv6: IFA_ADDRESS addr | [IFA_FLAGS u32 IFA_F_NODAD]
Message build_add(int index, const IpPrefix& prefix, bool nodad) {
  Message m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  put_ifaddr(m, index, prefix, nodad ? IFA_F_NODAD : 0);
  put_addr(m, prefix, true);
  if (nodad) m.put_u32(IFA_FLAGS, IFA_F_NODAD);
  return m;
}

Status add(netlink::Socket& nl, int index, const IpPrefix& prefix, bool nodad) {
  std::string what = "add address " + prefix.str() + " to link index " + std::to_string(index);
  PLUMB_TRY(check_prefix(prefix, what));
  Message m = build_add(index, prefix, nodad);
  return netlink::classify_create(nl.request(m, what));
}

Result<bool> remove(netlink::Socket& nl, int index, const IpPrefix& prefix) {
  std::string what = "remove address " + prefix.str() + " from link index " + std::to_string(index);
  PLUMB_TRY(check_prefix(prefix, what));
  Message m(RTM_DELADDR, 0);
  put_ifaddr(m, index, prefix, 0);
  put_addr(m, prefix, false);
  auto st = nl.request(m, what);
  if (st) return true;
  if (st.error().sys_errno == EADDRNOTAVAIL) return false;
  return std::unexpected(st.error());
}

Result<std::vector<AddrInfo>> list(netlink::Socket& nl, int index, int family) {
  std::vector<AddrInfo> out;
  Message m(RTM_GETADDR, NLM_F_DUMP);
  auto* ifa = m.put_header<ifaddrmsg>();
  ifa->ifa_family = static_cast<uint8_t>(family);
  ifa->ifa_index = static_cast<uint32_t>(index);  // a filter under strict checking (socket.cpp)
  PLUMB_TRY(nl.dump(m, "dump addresses", [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWADDR) return {};
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(ifaddrmsg), IFA_MAX, kAddrPolicy));
    const auto* msg = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(nlh));
    if (msg->ifa_family != AF_INET && msg->ifa_family != AF_INET6) return {};
    if (family != 0 && msg->ifa_family != family) return {};
    if (index != 0 && static_cast<int>(msg->ifa_index) != index) return {};
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer on point-to-point links.
    const nlattr* a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    if (a == nullptr) return {};
    AddrInfo ai;
    ai.index = static_cast<int>(msg->ifa_index);
    ai.prefix.addr = PLUMB_TRY(netlink::read_addr(a, msg->ifa_family));
    ai.prefix.len = msg->ifa_prefixlen;
    ai.scope = msg->ifa_scope;
    ai.flags = tb[IFA_FLAGS] ? mnl_attr_get_u32(tb[IFA_FLAGS]) : msg->ifa_flags;
    out.push_back(ai);
    return {};
  }));
  return out;
}

namespace {

/// The first IPv6 address of link `index` that failed DAD (flags IFA_F_DADFAILED), else the
/// first still tentative; nullopt when none is either.
Result<std::optional<AddrInfo>> unsettled(netlink::Socket& nl, int index) {
  auto v6 = PLUMB_TRY(list(nl, index, AF_INET6));
  std::optional<AddrInfo> tentative;
  for (const auto& a : v6) {
    if ((a.flags & IFA_F_DADFAILED) != 0) return std::optional<AddrInfo>(a);
    if ((a.flags & IFA_F_TENTATIVE) != 0 && !tentative) tentative = a;
  }
  return tentative;
}

/// Reads and drops every queued notification of `fd` (their content is looked up again).
void drain(int fd) {
  char buf[8192];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && errno == ENOBUFS)) return;  // ENOBUFS: some were lost, read on
  }
}

}  // namespace

Status settle(netlink::Socket& nl, int netns_fd, int index, std::chrono::milliseconds timeout) {
  auto first = PLUMB_TRY(unsettled(nl, index));
  if (!first) return {};
  auto events = PLUMB_TRY(netlink::Socket::open_in(netns_fd));
  const unsigned group = RTNLGRP_IPV6_IFADDR;
  if (::setsockopt(events.fd(), SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) != 0) {
    return fail_errno(errno, "subscribe to IPv6 address notifications");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Subscribed before this look: a change after it wakes the poll below.
    auto a = PLUMB_TRY(unsettled(nl, index));
    if (!a) return {};
    if ((a->flags & IFA_F_DADFAILED) != 0) {
      return fail_errno(EADDRNOTAVAIL, "address " + a->prefix.str() + " failed duplicate address detection (DADFAILED)");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      auto l = PLUMB_TRY(link::get(nl, index));
      if (!l || (l->flags & IFF_RUNNING) == 0) return {};
      return fail_errno(ETIMEDOUT, "address " + a->prefix.str() + " still tentative after " + std::to_string(timeout.count()) + " ms");
    }
    pollfd p{events.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return fail_errno(errno, "wait for IPv6 address notifications");
    drain(events.fd());
  }
}

Result<bool> dad_skipped(const link::LinkInfo& link, const netns::Netns& ns) {
  if (!link.inet6_accept_dad) return false;
  if ((link.flags & IFF_NOARP) != 0) return true;
  if (*link.inet6_accept_dad >= 1) return false;
  // The namespace-wide switch has no netlink form; read only where the link's own is off.
  auto guard = PLUMB_TRY(netns::Guard::enter(ns));
  const std::string all = PLUMB_TRY(sysctl::read("net/ipv6/conf/all/accept_dad"));
  char* end = nullptr;
  const long v = std::strtol(all.c_str(), &end, 10);
  if (all.empty() || *end != '\0')
    return fail(cni_code::kKernel, "net.ipv6.conf.all.accept_dad reads \"" + all + "\", not a number");
  return v < 1;
}

Result<bool> dad_skipped(netlink::Socket& nl, const netns::Netns& ns, int index) {
  auto l = PLUMB_TRY(link::get(nl, index));
  if (!l) return false;
  return dad_skipped(*l, ns);
}

}  // namespace plumb::addr
