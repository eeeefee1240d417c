// Typed address operations over rtnetlink (RTM_NEWADDR/DELADDR/GETADDR).
#pragma once

#include <chrono>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/netns.hpp"
#include "engine/base/result.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::addr {

struct AddrInfo {
  int index = 0;
  IpPrefix prefix;      // address with prefix length (IFA_ADDRESS / IFA_LOCAL for IPv4)
  uint8_t scope = 0;
  uint32_t flags = 0;   // IFA_F_* (IFA_FLAGS if present)
};

/// Adds `prefix` to link `index` with NLM_F_CREATE|NLM_F_EXCL. IPv4 gets IFA_LOCAL+IFA_ADDRESS
/// and IFA_BROADCAST; nodad sets IFA_F_NODAD (IPv6: no duplicate address detection wait).
/// Errors: EEXIST when the address is already there.
[[nodiscard]] Status add(netlink::Socket& nl, int index, const IpPrefix& prefix, bool nodad = false);
[[nodiscard]] netlink::Message build_add(int index, const IpPrefix& prefix, bool nodad);
/// Removes the address. Returns false if it was not there (EADDRNOTAVAIL).
[[nodiscard]] Result<bool> remove(netlink::Socket& nl, int index, const IpPrefix& prefix);
/// Lists addresses of link `index` (0: all links) of `family` (AF_UNSPEC: both).
[[nodiscard]] Result<std::vector<AddrInfo>> list(netlink::Socket& nl, int index = 0, int family = 0);

/// Waits until no IPv6 address of link `index` is tentative (duplicate address detection done),
/// as the reference plugins' ip.SettleAddresses after ipam.ConfigureIface: woken by the kernel's
/// RTNLGRP_IPV6_IFADDR notifications (a socket opened in the namespace `netns_fd`, only when an
/// address is tentative), each followed by a look at the link's addresses through `nl` (the
/// same namespace). Returns once none is tentative, or at `timeout` when the link is not running
/// (no carrier: the kernel starts DAD only then; the reference returns success too).
/// Errors: kKernel EADDRNOTAVAIL "address <a> failed duplicate address detection (DADFAILED)";
/// kKernel ETIMEDOUT "address <a> still tentative after <n> ms" on a running link; listing's.
[[nodiscard]] Status settle(netlink::Socket& nl, int netns_fd, int index, std::chrono::milliseconds timeout);

/// Whether the kernel skips IPv6 duplicate address detection on `link` (an answer about a link
/// of namespace `ns`, as link::get gives it), as addrconf_dad_begin decides it: the link has
/// IFF_NOARP, or both its own accept_dad (LinkInfo::inet6_accept_dad) and
/// net.ipv6.conf.all.accept_dad of namespace `ns` (read there only when the link's is off) are
/// below 1. Then a new address is tentative only until the kernel's address configuration work
/// runs, which clears the flag without sending anything: no address can fail detection, and
/// waiting for it measures only how busy that work queue is (it grows with the devices of the
/// node). Returns false for a link without IPv6. No netlink request: the caller's answer is
/// trusted to be current (accept_dad changed since it was read is not seen). Errors: the sysctl
/// read's, naming the key.
[[nodiscard]] Result<bool> dad_skipped(const link::LinkInfo& link, const netns::Netns& ns);
/// The same for link `index` of `nl`'s namespace, looked up with one RTM_GETLINK; false for a
/// link that does not exist. Errors: the look-up's and the sysctl read's.
[[nodiscard]] Result<bool> dad_skipped(netlink::Socket& nl, const netns::Netns& ns, int index);

}  // namespace plumb::addr
