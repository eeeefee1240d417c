// Gratuitous ARP and unsolicited Neighbor Advertisements (announce.hpp).
#include "engine/kernel/announce.hpp"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if_arp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "engine/kernel/link.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::announce {
namespace {

/// A socket closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

Status send_garp(int index, const Mac& mac, const IpAddr& ip, const std::string& what) {
  Fd s{::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP))};
  if (s.fd < 0) return fail_errno(errno, what + ": AF_PACKET socket");
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_protocol = htons(ETH_P_ARP);
  to.sll_ifindex = index;
  to.sll_hatype = ARPHRD_ETHER;
  to.sll_halen = ETH_ALEN;
  std::memset(to.sll_addr, 0xff, ETH_ALEN);
  auto pkt = build_garp(mac, ip);
  if (::sendto(s.fd, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    return fail_errno(errno, what + ": send gratuitous ARP");
  }
  return {};
}

Status send_na(int index, const Mac& mac, const IpAddr& ip, const std::string& what) {
  Fd s{::socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6)};
  if (s.fd < 0) return fail_errno(errno, what + ": raw ICMPv6 socket");
  int hops = 255;  // RFC 4861 7.1.2: a Neighbor Advertisement's hop limit is 255
  if (::setsockopt(s.fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops) != 0 ||
      ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof index) != 0) {
    return fail_errno(errno, what + ": set hop limit and interface");
  }
  sockaddr_in6 from{};
  from.sin6_family = AF_INET6;
  std::memcpy(&from.sin6_addr, ip.bytes.data(), 16);
  from.sin6_scope_id = static_cast<uint32_t>(index);
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return fail_errno(errno, what + ": bind to the address");
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  ::inet_pton(AF_INET6, "ff02::1", &to.sin6_addr);
  to.sin6_scope_id = static_cast<uint32_t>(index);
  auto pkt = build_unsolicited_na(mac, ip);
  if (::sendto(s.fd, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    return fail_errno(errno, what + ": send unsolicited neighbor advertisement");
  }
  return {};
}

}  // namespace

std::vector<uint8_t> build_garp(const Mac& mac, const IpAddr& ip) {
  arphdr h{};
  h.ar_hrd = htons(ARPHRD_ETHER);
  h.ar_pro = htons(ETH_P_IP);
  h.ar_hln = ETH_ALEN;
  h.ar_pln = 4;
  h.ar_op = htons(ARPOP_REQUEST);
  std::vector<uint8_t> out;
  put(out, h);
  out.insert(out.end(), mac.bytes.begin(), mac.bytes.end());        // sender hardware address
  out.insert(out.end(), ip.bytes.begin(), ip.bytes.begin() + 4);    // sender protocol address
  out.insert(out.end(), ETH_ALEN, 0xff);                            // target hardware address: broadcast
  out.insert(out.end(), ip.bytes.begin(), ip.bytes.begin() + 4);    // target protocol address
  return out;
}

std::vector<uint8_t> build_unsolicited_na(const Mac& mac, const IpAddr& ip) {
  nd_neighbor_advert na{};
  na.nd_na_type = ND_NEIGHBOR_ADVERT;
  na.nd_na_code = 0;
  na.nd_na_flags_reserved = ND_NA_FLAG_OVERRIDE;  // unsolicited: Solicited clear, Override set
  std::memcpy(&na.nd_na_target, ip.bytes.data(), 16);
  nd_opt_hdr opt{};
  opt.nd_opt_type = ND_OPT_TARGET_LINKADDR;
  opt.nd_opt_len = 1;  // in units of 8 bytes: type, length, 6-byte MAC
  std::vector<uint8_t> out;
  put(out, na);
  put(out, opt);
  out.insert(out.end(), mac.bytes.begin(), mac.bytes.end());
  return out;
}

bool wait_for_carrier(netlink::Socket& nl, int index, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  std::chrono::microseconds pause{2000};
  for (;;) {
    auto l = link::get(nl, index);
    if (l && *l && ((*l)->flags & IFF_LOWER_UP) != 0) return true;
    if (std::chrono::steady_clock::now() - start >= limit) return false;
    std::this_thread::sleep_for(pause);
    pause += pause / 2;
  }
}

Status send(const netns::Netns& ns, const std::string& ifname, int index, const Mac& mac,
            const std::vector<IpAddr>& addrs) {
  auto guard = netns::Guard::enter(ns);
  if (!guard) return std::unexpected(guard.error().within("announce the addresses of " + ifname));
  Status first;
  for (const auto& ip : addrs) {
    const std::string what = "announce " + ip.str() + " on " + ifname;
    Status st = ip.is_v4() ? send_garp(index, mac, ip, what) : send_na(index, mac, ip, what);
    if (!st && first) first = st;
  }
  return first;
}

Status enable_notify(const netns::Netns& ns, const std::string& ifname) {
  auto guard = netns::Guard::enter(ns);
  if (!guard) return std::unexpected(guard.error().within("enable arp_notify/ndisc_notify on " + ifname));
  PLUMB_TRY(sysctl::write("net/ipv4/conf/" + ifname + "/arp_notify", "1"));
  return sysctl::write("net/ipv6/conf/" + ifname + "/ndisc_notify", "1");
}

}  // namespace plumb::announce
