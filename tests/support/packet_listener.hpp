// An AF_PACKET listener on a link of the test's node namespace (e.g. the peer of a veth standing in
// for a VF netdev, or a macvlan master's peer): every frame that crosses it, for a bounded time.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/icmp6.h>
#include <netinet/ip6.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace plumb::test {

/// An AF_PACKET listener on a node-side link (the peer of a VF netdev stand-in), or with `ifname`
/// "" on every link of the namespace (also those made after it): every frame it sees.
class Listener {
 public:
  explicit Listener(const std::string& ifname) {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    REQUIRE(fd_ >= 0);
    sockaddr_ll sa{};
    sa.sll_family = AF_PACKET;
    sa.sll_protocol = htons(ETH_P_ALL);
    sa.sll_ifindex = ifname.empty() ? 0 : static_cast<int>(::if_nametoindex(ifname.c_str()));
    REQUIRE((ifname.empty() || sa.sll_ifindex > 0));
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  /// Frames that arrive within `limit` (bounded: at most 200 frames).
  std::vector<std::vector<uint8_t>> frames(std::chrono::milliseconds limit) {
    std::vector<std::vector<uint8_t>> out;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end && out.size() < 200) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      std::vector<uint8_t> buf(2048);
      ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
      if (n > 0) out.emplace_back(buf.begin(), buf.begin() + n);
    }
    return out;
  }

 private:
  int fd_ = -1;
};


/// True for an Ethernet frame holding a gratuitous ARP request (RFC 5944 4.6) from `mac` for IPv4
/// address `ip` (its first 4 bytes): broadcast destination, sender MAC = mac, sender and target IP = ip.
inline bool is_garp(const std::vector<uint8_t>& f, const std::array<uint8_t, 6>& mac, const std::array<uint8_t, 16>& ip) {
  // Copied out of the frame: its headers are not aligned for the structs.
  ether_header eth{};
  arphdr arp{};
  if (f.size() < sizeof eth + sizeof arp + 20) return false;
  std::memcpy(&eth, f.data(), sizeof eth);
  std::memcpy(&arp, f.data() + sizeof eth, sizeof arp);
  const uint8_t* sha = f.data() + sizeof eth + sizeof arp;
  return ntohs(eth.ether_type) == ETHERTYPE_ARP && ntohs(arp.ar_op) == ARPOP_REQUEST &&
         std::equal(mac.begin(), mac.end(), eth.ether_shost) &&
         std::all_of(eth.ether_dhost, eth.ether_dhost + 6, [](uint8_t x) { return x == 0xff; }) &&
         std::equal(mac.begin(), mac.end(), sha) && std::equal(ip.begin(), ip.begin() + 4, sha + 6) &&
         std::equal(ip.begin(), ip.begin() + 4, sha + 16);
}

/// True for an Ethernet frame holding an unsolicited Neighbor Advertisement (RFC 4861 7.2.6) for
/// `ip` from `mac`: hop limit 255, Override set, Solicited clear, a Target Link-Layer option = mac.
inline bool is_unsolicited_na(const std::vector<uint8_t>& f, const std::array<uint8_t, 6>& mac,
                              const std::array<uint8_t, 16>& ip) {
  ether_header eth{};
  ip6_hdr ip6{};
  nd_neighbor_advert adv{};
  if (f.size() < sizeof eth + sizeof ip6 + sizeof adv + 8) return false;
  std::memcpy(&eth, f.data(), sizeof eth);
  std::memcpy(&ip6, f.data() + sizeof eth, sizeof ip6);
  std::memcpy(&adv, f.data() + sizeof eth + sizeof ip6, sizeof adv);
  const uint8_t* opt = f.data() + sizeof eth + sizeof ip6 + sizeof adv;
  return ntohs(eth.ether_type) == ETHERTYPE_IPV6 && ip6.ip6_nxt == IPPROTO_ICMPV6 && ip6.ip6_hlim == 255 &&
         adv.nd_na_type == ND_NEIGHBOR_ADVERT && (adv.nd_na_flags_reserved & ND_NA_FLAG_OVERRIDE) != 0 &&
         (adv.nd_na_flags_reserved & ND_NA_FLAG_SOLICITED) == 0 && std::memcmp(&adv.nd_na_target, ip.data(), 16) == 0 &&
         opt[0] == ND_OPT_TARGET_LINKADDR && opt[1] == 1 && std::equal(mac.begin(), mac.end(), opt + 2);
}

}  // namespace plumb::test
