// Announcing a pod interface's addresses to its link once it is up, as sriov-cni (and the
// reference macvlan plugin, IPv4 only) do, so switches and neighbours learn the MAC that now owns
// an address at once instead of after their cache entry times out (a VF's MAC moves with every
// pod; an address is reused by the next pod):
//   IPv4  a gratuitous ARP request (RFC 5944 4.6): sender and target protocol address both the
//         pod's address, sender hardware address its MAC, target hardware address broadcast,
//         sent to the broadcast MAC over an AF_PACKET datagram socket (the kernel adds the
//         Ethernet header);
//   IPv6  an unsolicited Neighbor Advertisement (RFC 4861 7.2.6): Override flag set, Solicited
//         clear, the address as target, a Target Link-Layer Address option with the MAC, sent
//         from that address to all-nodes ff02::1 with hop limit 255 over a raw ICMPv6 socket (the
//         kernel computes the checksum).
// enable_notify sets arp_notify/ndisc_notify on the interface (sriov-cni does for VFs), so the
// kernel repeats this itself when the link goes down and up again or its MAC changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/base/netns.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::announce {

/// The 28-byte ARP payload of a gratuitous ARP request for IPv4 address `ip` from `mac`.
[[nodiscard]] std::vector<uint8_t> build_garp(const Mac& mac, const IpAddr& ip);
/// The 32-byte ICMPv6 message of an unsolicited Neighbor Advertisement for `ip` from `mac`
/// (checksum 0: the kernel fills it in).
[[nodiscard]] std::vector<uint8_t> build_unsolicited_na(const Mac& mac, const IpAddr& ip);

/// Waits until interface `index` (in the socket's namespace) has carrier (IFF_LOWER_UP), polling
/// with growing pauses (2 ms, x1.5), at most `limit`. Returns whether it has carrier.
[[nodiscard]] bool wait_for_carrier(netlink::Socket& nl, int index, std::chrono::milliseconds limit);

/// In namespace `ns`: sends one gratuitous ARP per IPv4 and one unsolicited NA per IPv6 address of
/// `addrs` on interface `index` (named `ifname` in messages) with `mac`.
/// Every address is tried. Errors: the first failure (socket, setsockopt, sendto), naming the
/// interface and address; callers treat announcing as best effort.
[[nodiscard]] Status send(const netns::Netns& ns, const std::string& ifname, int index, const Mac& mac,
                          const std::vector<IpAddr>& addrs);

/// In namespace `ns`: net.ipv4.conf.<ifname>.arp_notify = 1 and net.ipv6.conf.<ifname>.ndisc_notify
/// = 1. Errors: the sysctl writes' (an interface without IPv6 has no ndisc_notify).
[[nodiscard]] Status enable_notify(const netns::Netns& ns, const std::string& ifname);

}  // namespace plumb::announce
