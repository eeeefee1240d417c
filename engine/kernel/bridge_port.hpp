// Bridge-port settings over rtnetlink (AF_BRIDGE): the VLANs of a port (`bridge vlan add/del/show`,
// IFLA_AF_SPEC / IFLA_BRIDGE_VLAN_INFO) and port isolation (IFLA_BRPORT_ISOLATED). Hairpin lives
// with the other link changes (link.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/netlink/message.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::bridge_port {

/// One VLAN of a bridge port (struct bridge_vlan_info): `pvid` = untagged frames entering the
/// port get this VID (BRIDGE_VLAN_INFO_PVID); `untagged` = frames of this VID leave the port
/// untagged (BRIDGE_VLAN_INFO_UNTAGGED).
struct PortVlan {
  uint16_t vid = 0;  // 1..4094
  bool pvid = false;
  bool untagged = false;
  bool operator==(const PortVlan&) const = default;
};

/// Adds (add=true, RTM_SETLINK) or removes (RTM_DELLINK) VLAN `v` on bridge port `index`, what
/// `bridge vlan add dev <port> vid <vid> [pvid] [untagged] master` sends:
///
///   ifinfomsg { AF_BRIDGE, index }
///   IFLA_AF_SPEC (nested)
///   +-- IFLA_BRIDGE_FLAGS      u16 BRIDGE_FLAGS_MASTER   (the bridge, not the port device, acts)
///   +-- IFLA_BRIDGE_VLAN_INFO  struct bridge_vlan_info { u16 flags; u16 vid; }
[[nodiscard]] netlink::Message build_port_vlan(int index, const PortVlan& v, bool add);
/// Errors: EOPNOTSUPP (kKernelFeature) on a kernel without bridge VLAN filtering
/// (CONFIG_BRIDGE_VLAN_FILTERING); EINVAL for a VID out of range; ENODEV/EINVAL when `index` is
/// not a bridge port. Removing a VLAN the port does not have is success.
[[nodiscard]] Status add_vlan(netlink::Socket& nl, int index, const PortVlan& v);
[[nodiscard]] Status del_vlan(netlink::Socket& nl, int index, uint16_t vid);

/// The VLANs of bridge port `index`, in VID order (RTM_GETLINK dump of family AF_BRIDGE with
/// IFLA_EXT_MASK = RTEXT_FILTER_BRVLAN, the port's IFLA_AF_SPEC). Empty when the port has none or
/// the kernel has no VLAN filtering.
[[nodiscard]] Result<std::vector<PortVlan>> vlans(netlink::Socket& nl, int index);

/// Sets IFLA_BRPORT_ISOLATED on bridge port `index` (AF_BRIDGE RTM_SETLINK, IFLA_PROTINFO):
/// isolated ports cannot talk to each other, only to non-isolated ports (the reference bridge
/// plugin's portIsolation). Errors: EOPNOTSUPP when `index` is not a bridge port.
[[nodiscard]] Status set_isolated(netlink::Socket& nl, int index, bool isolated);

}  // namespace plumb::bridge_port
