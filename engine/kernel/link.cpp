#include "engine/kernel/link.hpp"

#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace plumb::link {
namespace {

using netlink::AttrPolicy;
using netlink::Message;
using netlink::classify_create;

/// What we read from an RTM_NEWLINK; nothing else is looked at.
const std::vector<AttrPolicy> kLinkPolicy = {
    {IFLA_IFNAME, MNL_TYPE_NUL_STRING}, {IFLA_ADDRESS, MNL_TYPE_BINARY},  {IFLA_MTU, MNL_TYPE_U32},
    {IFLA_MASTER, MNL_TYPE_U32},        {IFLA_LINK, MNL_TYPE_U32},        {IFLA_LINK_NETNSID, MNL_TYPE_U32},
    {IFLA_TXQLEN, MNL_TYPE_U32},        {IFLA_LINKINFO, MNL_TYPE_NESTED}, {IFLA_GROUP, MNL_TYPE_U32},
    {IFLA_AF_SPEC, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kLinkInfoPolicy = {
    {IFLA_INFO_KIND, MNL_TYPE_NUL_STRING},
    {IFLA_INFO_DATA, MNL_TYPE_NESTED},
};

/// The kind-specific IFLA_INFO_DATA attributes LinkInfo reports.
Status parse_info_data(const nlattr* data, LinkInfo& li) {
  if (li.kind == "ipvlan") {
    auto tb = PLUMB_TRY(netlink::parse_nested(data, IFLA_IPVLAN_MAX, {{IFLA_IPVLAN_MODE, MNL_TYPE_U16}}));
    if (tb[IFLA_IPVLAN_MODE]) li.ipvlan_mode = mnl_attr_get_u16(tb[IFLA_IPVLAN_MODE]);
  } else if (li.kind == "vlan") {
    auto tb = PLUMB_TRY(netlink::parse_nested(data, IFLA_VLAN_MAX, {{IFLA_VLAN_ID, MNL_TYPE_U16}}));
    if (tb[IFLA_VLAN_ID]) li.vlan_id = mnl_attr_get_u16(tb[IFLA_VLAN_ID]);
  } else if (li.kind == "vrf") {
    auto tb = PLUMB_TRY(netlink::parse_nested(data, IFLA_VRF_MAX, {{IFLA_VRF_TABLE, MNL_TYPE_U32}}));
    if (tb[IFLA_VRF_TABLE]) li.vrf_table = mnl_attr_get_u32(tb[IFLA_VRF_TABLE]);
  } else if (li.kind == "macvlan") {
    auto tb = PLUMB_TRY(netlink::parse_nested(data, IFLA_MACVLAN_MAX, {{IFLA_MACVLAN_BC_QUEUE_LEN, MNL_TYPE_U32}}));
    if (tb[IFLA_MACVLAN_BC_QUEUE_LEN]) li.macvlan_bc_queue_len = mnl_attr_get_u32(tb[IFLA_MACVLAN_BC_QUEUE_LEN]);
  } else if (li.kind == "bridge") {
    auto tb = PLUMB_TRY(netlink::parse_nested(data, IFLA_BR_MAX, {{IFLA_BR_VLAN_FILTERING, MNL_TYPE_U8}}));
    if (tb[IFLA_BR_VLAN_FILTERING]) li.vlan_filtering = mnl_attr_get_u8(tb[IFLA_BR_VLAN_FILTERING]) != 0;
  }
  return {};
}

/// The link's own accept_dad from IFLA_AF_SPEC / AF_INET6 / IFLA_INET6_CONF (the link's IPv6
/// sysctls, one s32 per DEVCONF_* index); left unset when the link has no IPv6 configuration.
Status parse_inet6_conf(const nlattr* af_spec, LinkInfo& li) {
  return netlink::for_each_nested(af_spec, [&](const nlattr* family) -> Status {
    if (mnl_attr_get_type(family) != AF_INET6) return {};
    auto conf = PLUMB_TRY(netlink::parse_nested(family, IFLA_INET6_MAX, {{IFLA_INET6_CONF, MNL_TYPE_BINARY}}));
    const size_t at = static_cast<size_t>(DEVCONF_ACCEPT_DAD) * sizeof(int32_t);
    if (conf[IFLA_INET6_CONF] == nullptr || mnl_attr_get_payload_len(conf[IFLA_INET6_CONF]) < at + sizeof(int32_t))
      return {};
    int32_t v = 0;
    std::memcpy(&v, static_cast<const uint8_t*>(mnl_attr_get_payload(conf[IFLA_INET6_CONF])) + at, sizeof v);
    li.inet6_accept_dad = v;
    return {};
  });
}

Result<LinkInfo> parse_link(const nlmsghdr* nlh) {
  auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(ifinfomsg), IFLA_MAX, kLinkPolicy));
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  LinkInfo li;
  li.index = ifi->ifi_index;
  li.flags = ifi->ifi_flags;
  if (tb[IFLA_IFNAME]) li.name = mnl_attr_get_str(tb[IFLA_IFNAME]);
  if (tb[IFLA_ADDRESS]) {
    const auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(tb[IFLA_ADDRESS]));
    li.hwaddr.assign(p, p + mnl_attr_get_payload_len(tb[IFLA_ADDRESS]));
  }
  if (tb[IFLA_MTU]) li.mtu_bytes = mnl_attr_get_u32(tb[IFLA_MTU]);
  if (tb[IFLA_MASTER]) li.master_index = static_cast<int>(mnl_attr_get_u32(tb[IFLA_MASTER]));
  if (tb[IFLA_LINK]) li.link_index = static_cast<int>(mnl_attr_get_u32(tb[IFLA_LINK]));
  if (tb[IFLA_LINK_NETNSID]) li.link_netnsid = static_cast<int32_t>(mnl_attr_get_u32(tb[IFLA_LINK_NETNSID]));
  if (tb[IFLA_TXQLEN]) li.txqlen = mnl_attr_get_u32(tb[IFLA_TXQLEN]);
  if (tb[IFLA_GROUP]) li.group = mnl_attr_get_u32(tb[IFLA_GROUP]);
  if (tb[IFLA_LINKINFO]) {
    auto info = PLUMB_TRY(netlink::parse_nested(tb[IFLA_LINKINFO], IFLA_INFO_MAX, kLinkInfoPolicy));
    if (info[IFLA_INFO_KIND]) li.kind = mnl_attr_get_str(info[IFLA_INFO_KIND]);
    if (info[IFLA_INFO_DATA]) PLUMB_TRY(parse_info_data(info[IFLA_INFO_DATA], li));
  }
  if (tb[IFLA_AF_SPEC]) PLUMB_TRY(parse_inet6_conf(tb[IFLA_AF_SPEC], li));
  return li;
}

ifinfomsg* put_ifinfo(Message& m, int family, int index) {
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_family = static_cast<uint8_t>(family);
  ifi->ifi_index = index;
  return ifi;
}

Result<std::optional<LinkInfo>> get_one(netlink::Socket& nl, Message& m, const std::string& what) {
  std::optional<LinkInfo> found;
  auto st = nl.query(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWLINK) return {};
    found = PLUMB_TRY(parse_link(nlh));
    return {};
  });
  if (!st) {
    if (st.error().sys_errno == ENODEV) return std::optional<LinkInfo>{};
    return std::unexpected(st.error());
  }
  return found;
}

/// Turns kernel errnos of a create into the CNI code callers report.
Status check_name(const std::string& name, const char* field, const std::string& op) {
  if (valid_ifname(name)) return {};
  return std::unexpected(
      Error{cni_code::kInvalidConfig, EINVAL, op + ": invalid " + field + " \"" + name + "\"", {}});
}

}  // namespace

bool LinkInfo::up() const { return (flags & IFF_UP) != 0; }

std::optional<Mac> LinkInfo::mac() const {
  if (hwaddr.size() != 6) return std::nullopt;
  Mac m;
  std::memcpy(m.bytes.data(), hwaddr.data(), 6);
  return m;
}

Result<std::optional<LinkInfo>> get(netlink::Socket& nl, const std::string& name) {
  std::string what = "get link " + name;
  if (!valid_ifname(name)) return std::optional<LinkInfo>{};  // no device has it (a record's "r%d": the kernel named it r0)
  Message m(RTM_GETLINK, 0);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, name);
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  return get_one(nl, m, what);
}

Result<std::optional<LinkInfo>> get(netlink::Socket& nl, int index) {
  if (index <= 0) return std::optional<LinkInfo>{};
  Message m(RTM_GETLINK, 0);
  put_ifinfo(m, AF_UNSPEC, index);
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  return get_one(nl, m, "get link index " + std::to_string(index));
}

Result<std::vector<LinkInfo>> list(netlink::Socket& nl) {
  std::vector<LinkInfo> out;
  Message m(RTM_GETLINK, NLM_F_DUMP);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  PLUMB_TRY(nl.dump(m, "dump links", [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWLINK) return {};
    out.push_back(PLUMB_TRY(parse_link(nlh)));
    return {};
  }));
  return out;
}

// RTM_NEWLINK, NLM_F_REQUEST|NLM_F_CREATE|NLM_F_EXCL (NLM_F_ACK added by Socket::request):
//
//   nlmsghdr
//   ifinfomsg { AF_UNSPEC, index 0, [IFF_UP] }
//   IFLA_IFNAME      "host_name\0"
//   [IFLA_MTU        u32]
//   [IFLA_ADDRESS    6 bytes host_mac]
//   [IFLA_MASTER     u32 host_master_index]  a bridge port from birth
//   IFLA_LINKINFO (nested)
//   +-- IFLA_INFO_KIND  "veth\0"
//   +-- IFLA_INFO_DATA (nested)
//       +-- VETH_INFO_PEER (nested; payload starts with a full ifinfomsg)
//           ifinfomsg { AF_UNSPEC, index 0 }
//           IFLA_IFNAME     "peer_name\0"       final name: no rename after the move
//           [IFLA_NET_NS_FD u32 peer_netns_fd]  peer is born in that namespace
//           [IFLA_MTU       u32]
//           [IFLA_ADDRESS   6 bytes peer_mac]
//           [IFLA_GROUP     u32 peer_group]
//
// Nests carry NLA_F_NESTED (libmnl sets it); the kernel masks it for these liberal policies.
Message build_create_veth(const VethSpec& spec) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  ifinfomsg* ifi = put_ifinfo(m, AF_UNSPEC, 0);
  if (spec.host_up) ifi->ifi_flags = ifi->ifi_change = IFF_UP;
  m.put_str(IFLA_IFNAME, spec.host_name);
  if (spec.mtu_bytes != 0) m.put_u32(IFLA_MTU, spec.mtu_bytes);
  if (spec.host_mac) m.put(IFLA_ADDRESS, spec.host_mac->bytes.data(), spec.host_mac->bytes.size());
  if (spec.host_master_index > 0) m.put_u32(IFLA_MASTER, static_cast<uint32_t>(spec.host_master_index));
  {
    Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, "veth");
    Message::Nest data(m, IFLA_INFO_DATA);
    Message::Nest peer(m, VETH_INFO_PEER);
    put_ifinfo(m, AF_UNSPEC, 0);
    m.put_str(IFLA_IFNAME, spec.peer_name);
    if (spec.peer_netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(spec.peer_netns_fd));
    if (spec.mtu_bytes != 0) m.put_u32(IFLA_MTU, spec.mtu_bytes);
    if (spec.peer_mac) m.put(IFLA_ADDRESS, spec.peer_mac->bytes.data(), spec.peer_mac->bytes.size());
    if (spec.peer_group != 0) m.put_u32(IFLA_GROUP, spec.peer_group);
  }
  return m;
}

Result<std::optional<LinkInfo>> create_veth(netlink::Socket& nl, const VethSpec& spec) {
  std::string what = "create veth pair " + spec.host_name + "/" + spec.peer_name;
  if (spec.peer_netns_fd >= 0) what += " (peer in netns fd " + std::to_string(spec.peer_netns_fd) + ")";
  PLUMB_TRY(check_name(spec.host_name, "host interface name", what));
  PLUMB_TRY(check_name(spec.peer_name, "peer interface name", what));
  Message m = build_create_veth(spec);
  std::optional<LinkInfo> host;
  PLUMB_TRY(classify_create(nl.request_echo(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWLINK) return {};
    // The host end, not the peer's, should a kernel echo it; an echo that does not parse is as
    // none (the pair exists: the caller reads it back).
    auto li = parse_link(nlh);
    if (li && li->name == spec.host_name) host = std::move(*li);
    return {};
  })));
  if (host && spec.host_master_index > 0) host->master_index = spec.host_master_index;
  return host;
}

Status create_bridge(netlink::Socket& nl, const BridgeSpec& spec) {
  std::string what = "create bridge " + spec.name;
  PLUMB_TRY(check_name(spec.name, "bridge name", what));
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, spec.name);
  if (spec.mtu_bytes != 0) m.put_u32(IFLA_MTU, spec.mtu_bytes);
  if (spec.mac) m.put(IFLA_ADDRESS, spec.mac->bytes.data(), spec.mac->bytes.size());
  {
    Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, "bridge");
    if (spec.vlan_filtering) {
      Message::Nest data(m, IFLA_INFO_DATA);
      m.put_u8(IFLA_BR_VLAN_FILTERING, 1);
    }
  }
  if (spec.vlan_filtering) what += " with VLAN filtering";
  return classify_create(nl.request(m, what));
}

// RTM_NEWLINK, NLM_F_REQUEST|NLM_F_CREATE|NLM_F_EXCL (NLM_F_ACK added by Socket::request):
//
//   nlmsghdr
//   ifinfomsg { AF_UNSPEC, index 0 }
//   IFLA_IFNAME      "name\0"
//   IFLA_LINK        u32 master_index      resolved in the socket's namespace
//   [IFLA_MTU        u32]
//   [IFLA_ADDRESS    6 bytes mac]
//   [IFLA_NET_NS_FD  u32 netns_fd]         the macvlan is born in that namespace
//   [IFLA_GROUP      u32 group]
//   IFLA_LINKINFO (nested)
//   +-- IFLA_INFO_KIND  "macvlan\0"
//   +-- IFLA_INFO_DATA (nested)
//       +-- IFLA_MACVLAN_MODE u32 mode
//       +-- [IFLA_MACVLAN_BC_QUEUE_LEN u32]     when bc_queue_len != 0
Message build_create_macvlan(const MacvlanSpec& spec) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, spec.name);
  m.put_u32(IFLA_LINK, static_cast<uint32_t>(spec.master_index));
  if (spec.mtu_bytes != 0) m.put_u32(IFLA_MTU, spec.mtu_bytes);
  if (spec.mac) m.put(IFLA_ADDRESS, spec.mac->bytes.data(), spec.mac->bytes.size());
  if (spec.netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(spec.netns_fd));
  if (spec.group != 0) m.put_u32(IFLA_GROUP, spec.group);
  {
    Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, "macvlan");
    Message::Nest data(m, IFLA_INFO_DATA);
    m.put_u32(IFLA_MACVLAN_MODE, spec.mode);
    if (spec.bc_queue_len != 0) m.put_u32(IFLA_MACVLAN_BC_QUEUE_LEN, spec.bc_queue_len);
  }
  return m;
}

Status create_macvlan(netlink::Socket& nl, const MacvlanSpec& spec) {
  std::string what = "create macvlan " + spec.name + " on master index " + std::to_string(spec.master_index);
  if (spec.netns_fd >= 0) what += " (in netns fd " + std::to_string(spec.netns_fd) + ")";
  PLUMB_TRY(check_name(spec.name, "macvlan name", what));
  if (spec.master_index <= 0) {
    return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, what + ": no master interface", {}});
  }
  Message m = build_create_macvlan(spec);
  return classify_create(nl.request(m, what));
}

namespace {

/// A stacked link whose kind takes one u16 attribute: ifinfomsg, name, lower device, MTU, target
/// namespace, [group], IFLA_LINKINFO { IFLA_INFO_KIND kind, IFLA_INFO_DATA { attr u16 value } }.
Message stacked_link(const std::string& name, int master_index, uint32_t mtu_bytes, int netns_fd, uint32_t group, const char* kind,
                     uint16_t attr, uint16_t value) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, name);
  m.put_u32(IFLA_LINK, static_cast<uint32_t>(master_index));
  if (mtu_bytes != 0) m.put_u32(IFLA_MTU, mtu_bytes);
  if (netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(netns_fd));
  if (group != 0) m.put_u32(IFLA_GROUP, group);
  {
    Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, kind);
    Message::Nest data(m, IFLA_INFO_DATA);
    m.put_u16(attr, value);
  }
  return m;
}

Status create_stacked(netlink::Socket& nl, const std::string& kind, const std::string& name, int master_index, int netns_fd,
                      Message& m) {
  std::string what = "create " + kind + " " + name + " on master index " + std::to_string(master_index);
  if (netns_fd >= 0) what += " (in netns fd " + std::to_string(netns_fd) + ")";
  PLUMB_TRY(check_name(name, (kind + " name").c_str(), what));
  if (master_index <= 0) return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, what + ": no master interface", {}});
  return classify_create(nl.request(m, what));
}

}  // namespace

Message build_create_ipvlan(const IpvlanSpec& spec) {
  return stacked_link(spec.name, spec.master_index, spec.mtu_bytes, spec.netns_fd, spec.group, "ipvlan", IFLA_IPVLAN_MODE, spec.mode);
}

Status create_ipvlan(netlink::Socket& nl, const IpvlanSpec& spec) {
  Message m = build_create_ipvlan(spec);
  return create_stacked(nl, "ipvlan", spec.name, spec.master_index, spec.netns_fd, m);
}

Message build_create_vlan(const VlanSpec& spec) {
  return stacked_link(spec.name, spec.master_index, spec.mtu_bytes, spec.netns_fd, spec.group, "vlan", IFLA_VLAN_ID, spec.vlan_id);
}

Status create_vlan(netlink::Socket& nl, const VlanSpec& spec) {
  Message m = build_create_vlan(spec);
  return create_stacked(nl, "vlan", spec.name, spec.master_index, spec.netns_fd, m);
}

namespace {

/// A link without a lower device: ifinfomsg | IFLA_IFNAME name | IFLA_LINKINFO { IFLA_INFO_KIND
/// kind [, IFLA_INFO_DATA { IFLA_VRF_TABLE u32 }] }.
Message standalone_link(const std::string& name, const char* kind, std::optional<uint32_t> vrf_table) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, name);
  {
    Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, kind);
    if (vrf_table) {
      Message::Nest data(m, IFLA_INFO_DATA);
      m.put_u32(IFLA_VRF_TABLE, *vrf_table);
    }
  }
  return m;
}

}  // namespace

Status create_dummy(netlink::Socket& nl, const std::string& name) {
  std::string what = "create dummy " + name;
  PLUMB_TRY(check_name(name, "dummy name", what));
  Message m = standalone_link(name, "dummy", std::nullopt);
  return classify_create(nl.request(m, what));
}

Message build_create_vrf(const std::string& name, uint32_t table) { return standalone_link(name, "vrf", table); }

Status create_vrf(netlink::Socket& nl, const std::string& name, uint32_t table) {
  std::string what = "create vrf " + name + " (table " + std::to_string(table) + ")";
  PLUMB_TRY(check_name(name, "vrf name", what));
  Message m = build_create_vrf(name, table);
  return classify_create(nl.request(m, what));
}

Message build_modify(int index, const LinkChange& change) {
  Message m(RTM_NEWLINK, 0);
  ifinfomsg* ifi = put_ifinfo(m, AF_UNSPEC, index);
  auto flag = [&](const std::optional<bool>& v, unsigned bit) {
    if (!v) return;
    ifi->ifi_change |= bit;
    if (*v) ifi->ifi_flags |= bit;
  };
  flag(change.up, IFF_UP);
  flag(change.promisc, IFF_PROMISC);
  flag(change.allmulti, IFF_ALLMULTI);
  // ifi is not touched below: attribute puts may move the buffer.
  if (change.name) m.put_str(IFLA_IFNAME, *change.name);
  if (change.mtu_bytes) m.put_u32(IFLA_MTU, *change.mtu_bytes);
  if (change.mac) m.put(IFLA_ADDRESS, change.mac->bytes.data(), change.mac->bytes.size());
  if (change.master_index) m.put_u32(IFLA_MASTER, static_cast<uint32_t>(*change.master_index));
  if (change.netns_fd) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(*change.netns_fd));
  if (change.txqlen) m.put_u32(IFLA_TXQLEN, *change.txqlen);
  if (change.arp_notify) {
    Message::Nest spec(m, IFLA_AF_SPEC);
    Message::Nest inet(m, AF_INET);
    Message::Nest conf(m, IFLA_INET_CONF);
    m.put_u32(IPV4_DEVCONF_ARP_NOTIFY, *change.arp_notify ? 1 : 0);
  }
  return m;
}

Status modify(netlink::Socket& nl, int index, const LinkChange& change) {
  std::string what = "modify link index " + std::to_string(index);
  if (change.name) {
    what += " (rename to " + *change.name + ")";
    PLUMB_TRY(check_name(*change.name, "new interface name", what));
  }
  Message m = build_modify(index, change);
  auto st = nl.request(m, what);
  if (!st && st.error().sys_errno == EEXIST) return classify_create(st);
  return st;
}

Status set_bridge_port_hairpin(netlink::Socket& nl, int index, bool hairpin) {
  Message m(RTM_SETLINK, 0);
  put_ifinfo(m, AF_BRIDGE, index);
  {
    // NLA_F_NESTED tells br_setlink this is the nested IFLA_BRPORT_* form, not the legacy u8 state.
    Message::Nest protinfo(m, IFLA_PROTINFO);
    m.put_u8(IFLA_BRPORT_MODE, hairpin ? 1 : 0);
  }
  return nl.request(m, std::string("set hairpin ") + (hairpin ? "on" : "off") + " on bridge port index " +
                           std::to_string(index));
}

Result<bool> remove(netlink::Socket& nl, const std::string& name) {
  std::string what = "delete link " + name;
  if (!valid_ifname(name)) return false;  // no device has it
  Message m(RTM_DELLINK, 0);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, name);
  auto st = nl.request(m, what);
  if (st) return true;
  if (st.error().sys_errno == ENODEV) return false;
  return std::unexpected(st.error());
}

Result<bool> remove(netlink::Socket& nl, int index) {
  if (index <= 0) return false;
  Message m(RTM_DELLINK, 0);
  put_ifinfo(m, AF_UNSPEC, index);
  auto st = nl.request(m, "delete link index " + std::to_string(index));
  if (st) return true;
  if (st.error().sys_errno == ENODEV) return false;
  return std::unexpected(st.error());
}

Result<bool> remove_group(netlink::Socket& nl, uint32_t group) {
  const std::string what = "delete the links of group " + std::to_string(group);
  if (group == 0) return std::unexpected(Error{cni_code::kInternal, EINVAL, what + ": group 0 is every link's default", {}});
  Message m(RTM_DELLINK, 0);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_u32(IFLA_GROUP, group);
  auto st = nl.request(m, what);
  if (st) return true;
  if (st.error().sys_errno == ENODEV) return false;
  return std::unexpected(st.error());
}

}  // namespace plumb::link
