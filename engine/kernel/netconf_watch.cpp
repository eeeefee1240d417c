#include "engine/kernel/netconf_watch.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/filter.h>
#include <linux/netconf.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>

namespace plumb::netconf {

namespace {

constexpr unsigned group_bit(unsigned group) { return 1U << (group - 1); }

// Offsets in a notification: the netlink header, then the family header (ifaddrmsg: the link
// index at byte 4; netconfmsg: one byte padded to 4, then the attributes, the kernel putting
// NETCONFA_IFINDEX first). Classic BPF loads are big-endian, hence the constants through
// htons/htonl (identity on a big-endian machine, the byte swap the load made on a little one).
constexpr uint32_t kTypeOff = offsetof(nlmsghdr, nlmsg_type);
constexpr uint32_t kIfaIndexOff = NLMSG_HDRLEN + offsetof(ifaddrmsg, ifa_index);
constexpr uint32_t kFirstAttrTypeOff = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(netconfmsg)) + offsetof(nlattr, nla_type);
constexpr uint32_t kFirstAttrValueOff = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(netconfmsg)) + NLA_HDRLEN;
constexpr uint32_t kAccept = 0xffffffffU;  // the whole message
constexpr uint32_t kDrop = 0;

sock_filter stmt(uint16_t code, uint32_t k) { return sock_filter{code, 0, 0, k}; }
sock_filter jump(uint16_t code, uint32_t k, size_t jt, size_t jf) {
  return sock_filter{code, static_cast<uint8_t>(jt), static_cast<uint8_t>(jf), k};
}

// The filter: address changes of `links` (of any link when it is too long for the jumps),
// netconf changes of NETCONFA_IFINDEX_ALL or without NETCONFA_IFINDEX first, and messages of any
// other type pass; the rest (other links' addresses and netconf) is dropped.
std::vector<sock_filter> build_filter(const std::vector<int>& links) {
  const bool all_links = links.size() > Watch::kMaxWatchedLinks;
  const size_t n = all_links ? 0 : links.size();
  // Layout: [0] load type, [1-4] type tests, [5-8] netconf, [9] load index, [10, 10+n) index
  // tests, [10+n] drop, [11+n] accept. A jump offset counts from the next instruction.
  const size_t addr = 9, drop = 10 + n, accept = 11 + n;
  std::vector<sock_filter> f;
  f.push_back(stmt(BPF_LD | BPF_H | BPF_ABS, kTypeOff));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htons(RTM_NEWADDR), addr - 2, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htons(RTM_DELADDR), addr - 3, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htons(RTM_NEWNETCONF), 5 - 4, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htons(RTM_DELNETCONF), 0, accept - 5));
  f.push_back(stmt(BPF_LD | BPF_H | BPF_ABS, kFirstAttrTypeOff));                                  // 5
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htons(NETCONFA_IFINDEX), 0, accept - 7));            // 6
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kFirstAttrValueOff));                                 // 7
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htonl(static_cast<uint32_t>(NETCONFA_IFINDEX_ALL)),  // 8
                   accept - 9, drop - 9));
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kIfaIndexOff));  // 9
  for (size_t i = 0; i < n; ++i) {
    const size_t at = 10 + i;
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, htonl(static_cast<uint32_t>(links[i])), accept - at - 1, 0));
  }
  f.push_back(stmt(BPF_RET | BPF_K, all_links ? kAccept : kDrop));  // drop
  f.push_back(stmt(BPF_RET | BPF_K, kAccept));                      // accept
  return f;
}

}  // namespace

bool drain_notifications(int fd) {
  // What passed a watch's filter needs no reading (any of it means "ask again"): small buffers
  // will do, a longer datagram is cut (MSG_TRUNC), which is still "something arrived".
  constexpr size_t kSlots = 32;
  std::array<std::array<char, 256>, kSlots> bufs;
  std::array<iovec, kSlots> iov{};
  std::array<mmsghdr, kSlots> msgs{};
  for (size_t i = 0; i < kSlots; ++i) {
    iov[i] = {bufs[i].data(), bufs[i].size()};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  bool any = false;
  for (int round = 0; round < 128; ++round) {
    const int n = recvmmsg(fd, msgs.data(), kSlots, MSG_DONTWAIT, nullptr);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return any;  // EWOULDBLOCK is EAGAIN on Linux
    if (n < 0 && errno != ENOBUFS) return true;
    // Notifications, or ENOBUFS: some were lost.
    any = true;
    if (n >= 0 && static_cast<size_t>(n) < kSlots) return true;  // the queue is empty now
  }
  return true;
}

Result<std::unique_ptr<Watch>> Watch::open() {
  mnl_socket* nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (nl == nullptr) return fail_errno(errno, "open the node's address and netconf notification socket");
  std::unique_ptr<Watch> w(new Watch(nl));
  // The filter before the groups: nothing unfiltered is ever queued.
  PLUMB_TRY(w->attach_filter());
  const unsigned groups = group_bit(RTNLGRP_IPV4_IFADDR) | group_bit(RTNLGRP_IPV6_IFADDR) |
                          group_bit(RTNLGRP_IPV4_NETCONF) | group_bit(RTNLGRP_IPV6_NETCONF);
  if (mnl_socket_bind(nl, groups, MNL_SOCKET_AUTOPID) < 0) {
    return fail_errno(errno, "subscribe to the node's address and netconf notifications");
  }
  return w;
}

Watch::~Watch() {
  if (nl_ != nullptr) mnl_socket_close(nl_);
}

Status Watch::attach_filter() {
  std::vector<sock_filter> f = build_filter(watched_);
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (setsockopt(mnl_socket_get_fd(nl_), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0) {
    return fail_errno(errno, "filter the node's address and netconf notifications");
  }
  return {};
}

void Watch::forget() {
  forwarding_v4_ = forwarding_v6_ = false;
  addresses_.clear();
  ++forgotten_;
}

void Watch::refresh() {
  if (drain_notifications(mnl_socket_get_fd(nl_))) forget();
}

bool Watch::forwarding_on(int family) const { return family == AF_INET6 ? forwarding_v6_ : forwarding_v4_; }

void Watch::note_forwarding_on(int family) { (family == AF_INET6 ? forwarding_v6_ : forwarding_v4_) = true; }

Status Watch::watch_addresses(int ifindex) {
  if (std::find(watched_.begin(), watched_.end(), ifindex) != watched_.end()) return {};
  watched_.push_back(ifindex);
  return attach_filter();
}

bool Watch::has_address(int ifindex, const IpPrefix& prefix) const { return addresses_.contains({ifindex, prefix}); }

void Watch::note_address(int ifindex, const IpPrefix& prefix) {
  if (std::find(watched_.begin(), watched_.end(), ifindex) != watched_.end()) addresses_.insert({ifindex, prefix});
}

}  // namespace plumb::netconf
