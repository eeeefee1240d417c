// Typed link operations over rtnetlink (RTM_NEWLINK/DELLINK/GETLINK/SETLINK).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/kernel/ifname.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::link {

/// What the kernel reports for one link (RTM_NEWLINK reply), policy-validated.
struct LinkInfo {
  int index = 0;
  std::string name;
  std::string kind;                 // IFLA_INFO_KIND: "veth", "bridge", "macvlan", "" if none
  std::vector<uint8_t> hwaddr;      // IFLA_ADDRESS (6 bytes for Ethernet, 20 for IPoIB)
  uint32_t mtu_bytes = 0;
  uint32_t flags = 0;               // ifi_flags (IFF_UP, IFF_PROMISC, ...)
  int master_index = 0;             // IFLA_MASTER, 0 if none
  int link_index = 0;               // IFLA_LINK (veth peer index / macvlan lower), 0 if none
  std::optional<int32_t> link_netnsid;  // IFLA_LINK_NETNSID
  uint32_t txqlen = 0;
  std::optional<uint32_t> macvlan_bc_queue_len;  // IFLA_MACVLAN_BC_QUEUE_LEN of a macvlan (kernel >= 5.11)
  // From IFLA_INFO_DATA, by kind (0 / nullopt for other kinds):
  std::optional<uint16_t> ipvlan_mode;  // "ipvlan": IFLA_IPVLAN_MODE (IPVLAN_MODE_L2 0, L3 1, L3S 2)
  uint16_t vlan_id = 0;                 // "vlan": IFLA_VLAN_ID
  uint32_t vrf_table = 0;               // "vrf": IFLA_VRF_TABLE
  std::optional<bool> vlan_filtering;   // "bridge": IFLA_BR_VLAN_FILTERING
  uint32_t group = 0;               // IFLA_GROUP (0: the default group)
  std::optional<int32_t>
      inet6_accept_dad;  // the link's own net.ipv6.conf.<link>.accept_dad (IFLA_INET6_CONF); nullopt: no IPv6
  bool up() const;
  std::optional<Mac> mac() const;   // when hwaddr is 6 bytes
};

/// Looks a link up by name. Returns nullopt when no such link (ENODEV, or a name no device can
/// have: not valid_ifname), an error otherwise.
[[nodiscard]] Result<std::optional<LinkInfo>> get(netlink::Socket& nl, const std::string& name);
/// Looks a link up by index. Returns nullopt when no such link.
[[nodiscard]] Result<std::optional<LinkInfo>> get(netlink::Socket& nl, int index);
/// Dumps every link of the socket's namespace (handles multi-part dumps > 8 KiB).
[[nodiscard]] Result<std::vector<LinkInfo>> list(netlink::Socket& nl);

/// A veth pair created in one RTM_NEWLINK: the host end in the socket's namespace, the peer
/// created directly in the namespace `peer_netns_fd` under `peer_name` (no rename needed).
///
///   ifinfomsg [IFF_UP with host_up] | IFLA_IFNAME host_name | IFLA_MTU | [IFLA_ADDRESS host_mac]
///   [IFLA_MASTER host_master_index]
///   IFLA_LINKINFO { IFLA_INFO_KIND "veth",
///                   IFLA_INFO_DATA { VETH_INFO_PEER { ifinfomsg | IFLA_IFNAME peer_name |
///                                     IFLA_NET_NS_FD | IFLA_MTU | [IFLA_ADDRESS peer_mac]
///                                     [IFLA_GROUP peer_group] } } }
struct VethSpec {
  std::string host_name;
  std::string peer_name;
  int peer_netns_fd = -1;           // -1: peer stays in the socket's namespace
  uint32_t mtu_bytes = 0;           // 0: kernel default
  std::optional<Mac> host_mac;
  std::optional<Mac> peer_mac;
  uint32_t peer_group = 0;          // IFLA_GROUP of the peer (kPodLinkGroup: removed with its pod's group); 0: none
  int host_master_index = 0;        // IFLA_MASTER of the host end (a bridge port from birth); 0: none
  bool host_up = false;             // the host end is up from birth (IFF_UP in the creating message)
};
/// Creates the pair with NLM_F_CREATE|NLM_F_EXCL and NLM_F_ECHO. Returns the host end as the
/// kernel echoed it (saving the read-back, which would wait for the kernel's pending link events),
/// its master_index the spec's (the kernel sets the master after echoing); nullopt from kernels
/// that echo nothing (before Linux 6.1) or an echo that does not parse: read the link then.
/// Errors: EEXIST when a name is taken.
[[nodiscard]] Result<std::optional<LinkInfo>> create_veth(netlink::Socket& nl, const VethSpec& spec);
/// Builds the message create_veth sends (for golden-byte tests).
[[nodiscard]] netlink::Message build_create_veth(const VethSpec& spec);

/// A Linux bridge created with NLM_F_CREATE|NLM_F_EXCL.
struct BridgeSpec {
  std::string name;
  uint32_t mtu_bytes = 0;
  std::optional<Mac> mac;           // pinned so the bridge MAC does not follow its ports
  bool vlan_filtering = false;      // IFLA_BR_VLAN_FILTERING
};
/// Errors: EEXIST when the name is taken (callers treat an existing bridge as success after
/// checking its kind).
[[nodiscard]] Status create_bridge(netlink::Socket& nl, const BridgeSpec& spec);

/// A macvlan on `master_index` created with NLM_F_CREATE|NLM_F_EXCL, optionally born directly in
/// another namespace (IFLA_NET_NS_FD; IFLA_LINK still names the master in the socket's
/// namespace). `mode` is a MACVLAN_MODE_* value (linux/if_link.h: private 1, vepa 2, bridge 4,
/// passthru 8, source 16).
///
///   ifinfomsg | IFLA_IFNAME name | IFLA_LINK master_index | [IFLA_MTU] | [IFLA_ADDRESS mac]
///   [IFLA_NET_NS_FD netns_fd]
///   IFLA_LINKINFO { IFLA_INFO_KIND "macvlan", IFLA_INFO_DATA { IFLA_MACVLAN_MODE u32 mode
///                                                             [IFLA_MACVLAN_BC_QUEUE_LEN u32] } }
struct MacvlanSpec {
  std::string name;
  int master_index = 0;
  uint32_t mode = 4;                // MACVLAN_MODE_BRIDGE
  uint32_t mtu_bytes = 0;           // 0: the master's
  std::optional<Mac> mac;           // nullopt: random
  int netns_fd = -1;                // -1: created in the socket's namespace
  uint32_t bc_queue_len = 0;        // IFLA_MACVLAN_BC_QUEUE_LEN (broadcast queue length); 0: the kernel's
  uint32_t group = 0;               // IFLA_GROUP; 0: none
};
/// Errors: EEXIST when the name is taken (kConflict), EINVAL for a mode the master cannot take
/// (e.g. passthru on a master that already has macvlans), EOPNOTSUPP without macvlan support.
[[nodiscard]] Status create_macvlan(netlink::Socket& nl, const MacvlanSpec& spec);
/// Builds the message create_macvlan sends (for golden-byte tests).
[[nodiscard]] netlink::Message build_create_macvlan(const MacvlanSpec& spec);

/// A link stacked on a lower device (`master_index`, resolved in the socket's namespace), created
/// with NLM_F_CREATE|NLM_F_EXCL, optionally born directly in another namespace (IFLA_NET_NS_FD):
///
///   ifinfomsg | IFLA_IFNAME name | IFLA_LINK master_index | [IFLA_MTU] | [IFLA_NET_NS_FD netns_fd]
///   IFLA_LINKINFO { IFLA_INFO_KIND "ipvlan", IFLA_INFO_DATA { IFLA_IPVLAN_MODE u16 mode } }
///   IFLA_LINKINFO { IFLA_INFO_KIND "vlan",   IFLA_INFO_DATA { IFLA_VLAN_ID u16 vlan_id } }
///
/// ipvlan `mode`: IPVLAN_MODE_L2 0, L3 1, L3S 2 (linux/if_link.h); an ipvlan has its master's MAC.
struct IpvlanSpec {
  std::string name;
  int master_index = 0;
  uint16_t mode = 0;                // IPVLAN_MODE_L2
  uint32_t mtu_bytes = 0;           // 0: the master's
  int netns_fd = -1;                // -1: created in the socket's namespace
  uint32_t group = 0;               // IFLA_GROUP; 0: none
};
struct VlanSpec {
  std::string name;
  int master_index = 0;
  uint16_t vlan_id = 0;             // 0..4094 (802.1Q VID)
  uint32_t mtu_bytes = 0;           // 0: the master's
  int netns_fd = -1;
  uint32_t group = 0;               // IFLA_GROUP; 0: none
};
/// Errors: EEXIST (kConflict) when the name is taken; EOPNOTSUPP (kKernelFeature) when the kernel
/// has no such link kind ("Unknown device type": no ipvlan / 8021q module); EINVAL for an MTU
/// above the master's or a mode the master cannot take.
[[nodiscard]] Status create_ipvlan(netlink::Socket& nl, const IpvlanSpec& spec);
[[nodiscard]] netlink::Message build_create_ipvlan(const IpvlanSpec& spec);
[[nodiscard]] Status create_vlan(netlink::Socket& nl, const VlanSpec& spec);
[[nodiscard]] netlink::Message build_create_vlan(const VlanSpec& spec);

/// A dummy device `name` in the socket's namespace (IFLA_INFO_KIND "dummy").
/// Errors: as create_ipvlan (EOPNOTSUPP without the dummy module).
[[nodiscard]] Status create_dummy(netlink::Socket& nl, const std::string& name);

/// A VRF device `name` bound to routing table `table` (IFLA_INFO_DATA { IFLA_VRF_TABLE u32 }).
/// Errors: as create_ipvlan (EOPNOTSUPP without the vrf module).
[[nodiscard]] Status create_vrf(netlink::Socket& nl, const std::string& name, uint32_t table);
[[nodiscard]] netlink::Message build_create_vrf(const std::string& name, uint32_t table);

/// Changes applied to an existing link in one RTM_NEWLINK (ifi_index set) message; unset fields
/// are left alone.
struct LinkChange {
  std::optional<std::string> name;  // IFLA_IFNAME (rename)
  std::optional<uint32_t> mtu_bytes;
  std::optional<Mac> mac;
  std::optional<bool> up;           // IFF_UP via ifi_flags/ifi_change
  std::optional<bool> promisc;      // IFF_PROMISC
  std::optional<bool> allmulti;     // IFF_ALLMULTI
  std::optional<int> master_index;  // IFLA_MASTER (0 = nomaster)
  std::optional<int> netns_fd;      // IFLA_NET_NS_FD (move to another namespace)
  std::optional<uint32_t> txqlen;   // IFLA_TXQLEN
  /// net.ipv4.conf.<name>.arp_notify without /proc/sys (engine/kernel/netconf.hpp says why):
  /// IFLA_AF_SPEC { AF_INET { IFLA_INET_CONF { IPV4_DEVCONF_ARP_NOTIFY u32 } } }. The kernel
  /// refuses it (EAFNOSUPPORT) for a device without IPv4.
  std::optional<bool> arp_notify;
};
[[nodiscard]] Status modify(netlink::Socket& nl, int index, const LinkChange& change);
[[nodiscard]] netlink::Message build_modify(int index, const LinkChange& change);

/// Sets bridge-port options of a bridge port (AF_BRIDGE RTM_SETLINK, IFLA_PROTINFO):
/// hairpin = IFLA_BRPORT_MODE. Errors: EOPNOTSUPP when the link is not a bridge port.
[[nodiscard]] Status set_bridge_port_hairpin(netlink::Socket& nl, int index, bool hairpin);

/// Deletes a link by name. Returns true if deleted, false if it did not exist (ENODEV, or a name
/// no device can have: not valid_ifname), an error otherwise.
[[nodiscard]] Result<bool> remove(netlink::Socket& nl, const std::string& name);
[[nodiscard]] Result<bool> remove(netlink::Socket& nl, int index);

/// The link group (IFLA_GROUP) of the devices plumb creates inside pod namespaces and deletes
/// with them (veth peers, macvlan, ipvlan, vlan, dummy): "plmb" in ASCII. A DEL removes them
/// all with one RTM_DELLINK (remove_group), paying the kernel's device unregistration (RCU
/// synchronisation) once per pod instead of once per device.
inline constexpr uint32_t kPodLinkGroup = 0x706c6d62;

/// Deletes every link of group `group` (not 0) in the socket's namespace with one RTM_DELLINK
/// (ifindex 0, IFLA_GROUP: what `ip link del group N` sends); veth peers elsewhere go with their
/// ends. Returns false when no link is in the group (ENODEV). Errors: EOPNOTSUPP when a link of
/// the group cannot be deleted (nothing is then deleted), other kernel errors.
[[nodiscard]] Result<bool> remove_group(netlink::Socket& nl, uint32_t group);

}  // namespace plumb::link
