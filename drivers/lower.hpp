// Steps the drivers of links stacked on a master device share (macvlan, ipvlan, vlan): finding
// the master (named, or the interface of the default route, as the reference plugins do), and
// creating the link directly in the pod namespace under the attachment's name (the reference
// plugins create it there under a temporary name and rename it; born in the pod, a name taken in
// the node namespace cannot collide with it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "drivers/driver.hpp"
#include "drivers/steps.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::drivers::lower {

/// The keys every stacked-link driver shares, validated as the reference plugins do.
struct Keys {
  std::string master;                ///< "master": "" when absent (each driver says what that means)
  std::optional<uint32_t> mtu_bytes; ///< "mtu" (parse_mtu), at most the master's (checked at ADD)
  bool link_in_container = false;    ///< "linkInContainer": the master lives in the pod namespace
};
/// Parses "master" (a valid interface name when given), "mtu" and "linkInContainer".
/// Errors: kInvalidConfig naming "<network>.<key>" and the value.
[[nodiscard]] Result<Keys> parse_keys(const json::Value& conf, const std::string& network);

/// The socket of the namespace the master lives in (the pod's with linkInContainer, else the node's).
[[nodiscard]] netlink::Socket& master_socket(const Context& ctx, const Keys& k);

/// The master for a driver's ADD: `name` (or the default route's interface when empty, see
/// find_master) in the namespace of master_socket, with k.mtu_bytes checked against its MTU.
/// Errors: find_master's; kInvalidConfig "<network>.mtu N is above the MTU M of master X".
[[nodiscard]] Result<link::LinkInfo> resolve_master(const Context& ctx, const Keys& k, const std::string& name);

/// The master link in `nl`'s namespace: `name`, or when `name` is empty the interface of the
/// first default route (IPv4 first, then IPv6). `where_ns` names the namespace in errors.
/// Errors: kInvalidConfig "<network>.master "<name>" not found in <where_ns>", or no default
/// route to take it from.
[[nodiscard]] Result<link::LinkInfo> find_master(netlink::Socket& nl, const std::string& name, const std::string& where_ns,
                                                 const std::string& network);

/// Makes the pod interface `spec` through the step CreatePodLink (drivers/steps.hpp: its deletion recorded
/// first, by name, only within link::kPodLinkGroup: never a link someone else made under that
/// name); its spec must make the link in link::kPodLinkGroup, named ctx.ifname, so that it is born
/// in the pod namespace under its final name (no rename: a rename re-registers the device's IPv4,
/// IPv6 and neighbour sysctl tables, about as costly as the creation). The step's ifname, group and
/// socket are set from ctx and `k`. Returns the link as the pod sees it. Errors: kConflict
/// when ctx.ifname already exists in the pod (the kernel's EEXIST); the step's others prefixed
/// with `what` ("create ipvlan (mode l2) on master eth0").
[[nodiscard]] Result<link::LinkInfo> create_in_pod(Context& ctx, const std::string& what, const Keys& k,
                                                   steps::PodLinkSpec spec);

/// Sets ndisc_notify on the pod interface ctx.ifname when `r` has an IPv6 address, so neighbours
/// learn the interface's MAC when it comes up (what the reference macvlan/ipvlan plugins set;
/// through /proc/sys in the pod namespace: rtnetlink cannot set it). Its arp_notify, the other
/// half, is finish_pod_interface's (with arp_notify), in the message that brings the link up
/// where there is no IPv4 address to announce. Errors: the kernel's, naming the key.
[[nodiscard]] Status notify_neighbours(Context& ctx, const cni::CniResult& r);

/// Once `pod_link` is up with `r`'s addresses: a gratuitous ARP per IPv4 address (IPv6 addresses
/// are still in DAD), as the reference macvlan plugin and sriov-cni do, so switches and neighbours
/// learn the moved MAC at once. Best effort (announce_addresses).
void announce(Context& ctx, const link::LinkInfo& pod_link, const cni::CniResult& r);

}  // namespace plumb::drivers::lower
