// Steps the drivers of links stacked on a master device share (macvlan, ipvlan, vlan): finding
// the master (named, or the interface of the default route, as the reference plugins do), and
// creating the link in the pod namespace under a temporary name, then renaming it there to the
// attachment's name (a name taken in the node namespace cannot collide with it).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "drivers/driver.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::drivers::lower {

/// The master link in `nl`'s namespace: `name`, or when `name` is empty the interface of the
/// first default route (IPv4 first, then IPv6). `where_ns` names the namespace in errors.
/// Errors: kInvalidConfig "<network>.master "<name>" not found in <where_ns>", or no default
/// route to take it from.
[[nodiscard]] Result<link::LinkInfo> find_master(netlink::Socket& nl, const std::string& name, const std::string& where_ns,
                                                 const std::string& network);

/// Makes the pod interface: fails with kConflict when ctx.ifname already exists in the pod, then
/// calls `create(tmp)` with a fresh temporary name "<prefix><8 hex digits>" (another name on
/// EEXIST, up to 5 tries) — `create` must make the link so that it lands in the pod namespace —
/// and renames it there to ctx.ifname. Undo operations (delete in the pod, under either name) are
/// registered before each change. Returns the link as the pod sees it. `what` ("create ipvlan
/// (mode l2) on master eth0") prefixes create's errors.
[[nodiscard]] Result<link::LinkInfo> create_renamed(Context& ctx, std::string_view prefix, const std::string& what,
                                                    const std::function<Status(const std::string& tmp)>& create);

/// Writes a sysctl (e.g. "net/ipv4/conf/eth0/arp_notify") inside the pod namespace.
[[nodiscard]] Status pod_sysctl(const Context& ctx, const std::string& key, const std::string& value);

/// Sets arp_notify on ctx.ifname, and ndisc_notify when `r` has an IPv6 address, so neighbours
/// learn the interface's MAC when it comes up (what the reference macvlan/ipvlan plugins set).
[[nodiscard]] Status notify_neighbours(const Context& ctx, const cni::CniResult& r);

}  // namespace plumb::drivers::lower
