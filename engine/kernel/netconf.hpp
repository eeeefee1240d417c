// A network namespace's IP forwarding switch, read over rtnetlink (RTM_GETNETCONF) instead of
// /proc/sys, and turned on only when it is off.
//
// Why not /proc/sys: every lookup of /proc/sys/net/ipv4 or /proc/sys/net/ipv6 walks one dentry
// hash chain holding an entry per network namespace that has looked that directory up (each
// namespace has its own `ipv4` and `ipv6` directories under the one shared `net` dentry, and
// proc_sys_compare rejects the other namespaces' entries one by one), so opening a key grows
// slower with every pod on the node (bench/RESULTS.md). A netlink request costs the same at any
// number of pods.
#pragma once

#include "engine/base/result.hpp"
#include "engine/kernel/netconf_watch.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::netconf {

/// Whether forwarding is on for the whole namespace of `nl` — net.ipv4.ip_forward
/// (= net.ipv4.conf.all.forwarding) for AF_INET, net.ipv6.conf.all.forwarding for AF_INET6:
/// RTM_GETNETCONF for NETCONFA_IFINDEX_ALL, its reply's NETCONFA_FORWARDING. Errors: the
/// kernel's (EAFNOSUPPORT: no such family in this kernel); kKernel when the reply has no
/// NETCONFA_FORWARDING.
[[nodiscard]] Result<bool> forwarding_all(netlink::Socket& nl, int family);

/// Turns forwarding on for the whole namespace when forwarding_all() says it is off, through
/// /proc/sys in the calling thread's network namespace, which must be `nl`'s. An unchanged
/// write is not free (net.ipv6.conf.all.forwarding walks every device of the namespace under
/// RTNL and resets each device's own forwarding), so nothing is written when it is on already,
/// as the reference plugins' `echo1` reads before writing. With `watch` (a warm process's, of
/// `nl`'s namespace), nothing is asked while it says forwarding is still on since the last
/// time. Errors: forwarding_all()'s, the write's (errno naming the key).
[[nodiscard]] Status ensure_forwarding(netlink::Socket& nl, int family, Watch* watch = nullptr);

}  // namespace plumb::netconf
