// What a process that serves one CNI invocation after another (a `plumb daemon` worker) may
// remember about its node namespace between them, and how it notices that a remembered fact may
// no longer hold: the forwarding switches (netconf.hpp) and the gateway addresses a bridge
// network found on its bridge. Each fact would otherwise cost a request per ADD (RTM_GETNETCONF,
// an RTM_GETADDR dump).
//
// How a fact is forgotten: an rtnetlink socket in the node namespace subscribed to the address
// and netconf groups (RTNLGRP_IPV4/IPV6_IFADDR, RTNLGRP_IPV4/IPV6_NETCONF) receives every change
// of an address or a forwarding switch, whoever makes it. A socket filter (classic BPF, run by
// the kernel for each notification) lets through only what can touch a fact: address changes
// on a watched interface, netconf changes of the whole namespace (NETCONFA_IFINDEX_ALL) or of an
// unexpected shape. refresh(), called before each use, reads what arrived without waiting, and
// forgets everything when anything did, or when the socket lost notifications (ENOBUFS) or
// failed: the next use asks the kernel again. Facts are only remembered after the socket
// watched them, so no change can slip between the kernel's answer and the watch.
#pragma once

#include <memory>
#include <set>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

struct mnl_socket;

namespace plumb::netconf {

/// Reads every datagram queued on the non-blocking notification socket `fd` without waiting
/// (up to 32 in one recvmmsg(), their contents discarded) and returns whether there was anything:
/// a notification, ENOBUFS (notifications were lost) or any other error; false only when the
/// socket was empty. Bounded: a flood that outlasts it leaves the rest for the next call, which
/// returns true again.
[[nodiscard]] bool drain_notifications(int fd);

/// Facts about the calling thread's network namespace (where open() ran), kept valid by a
/// notification socket. Not thread-safe; not copyable.
class Watch {
 public:
  /// Interfaces whose addresses the filter tells apart; beyond that, every address change of
  /// the namespace makes refresh() forget.
  static constexpr size_t kMaxWatchedLinks = 64;

  /// Opens the notification socket in the calling thread's current namespace (non-blocking,
  /// close-on-exec, subscribed to the four groups, with the filter). Errors: errno of
  /// socket/bind/setsockopt.
  [[nodiscard]] static Result<std::unique_ptr<Watch>> open();
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  /// Reads every notification queued, without waiting; forgets every fact when one arrived, on
  /// ENOBUFS (notifications lost) or any other receive error.
  void refresh();

  /// Whether forwarding of `family` (AF_INET, AF_INET6) for the whole namespace was seen on and
  /// nothing has changed it since.
  [[nodiscard]] bool forwarding_on(int family) const;
  /// Remembers that forwarding of `family` is on (RTM_GETNETCONF said so after the last refresh()).
  void note_forwarding_on(int family);

  /// Makes address changes of link `ifindex` reach refresh() (the filter rewritten when the
  /// link is new to it). Call before the look-up whose answer note_address() remembers.
  /// Errors: setsockopt's errno.
  [[nodiscard]] Status watch_addresses(int ifindex);
  /// Whether `prefix` was found on link `ifindex` with nothing to change and no address of the
  /// link has changed since.
  [[nodiscard]] bool has_address(int ifindex, const IpPrefix& prefix) const;
  /// Remembers that `prefix` is on link `ifindex` (watch_addresses() ran before the look-up).
  void note_address(int ifindex, const IpPrefix& prefix);

  /// How many times refresh() forgot everything (tests, diagnostics).
  [[nodiscard]] uint64_t forgotten() const { return forgotten_; }

 private:
  explicit Watch(mnl_socket* nl) : nl_(nl) {}
  Status attach_filter();
  void forget();

  mnl_socket* nl_ = nullptr;
  std::vector<int> watched_;  // links whose address changes pass the filter
  bool forwarding_v4_ = false;
  bool forwarding_v6_ = false;
  std::set<std::pair<int, IpPrefix>> addresses_;
  uint64_t forgotten_ = 0;
};

}  // namespace plumb::netconf
