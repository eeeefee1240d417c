#include "engine/kernel/link.hpp"

#include <linux/if.h>
#include <linux/if_link.h>
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
    {IFLA_IFNAME, MNL_TYPE_NUL_STRING}, {IFLA_ADDRESS, MNL_TYPE_BINARY},   {IFLA_MTU, MNL_TYPE_U32},
    {IFLA_MASTER, MNL_TYPE_U32},        {IFLA_LINK, MNL_TYPE_U32},         {IFLA_LINK_NETNSID, MNL_TYPE_U32},
    {IFLA_TXQLEN, MNL_TYPE_U32},        {IFLA_LINKINFO, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kLinkInfoPolicy = {
    {IFLA_INFO_KIND, MNL_TYPE_NUL_STRING},
    {IFLA_INFO_DATA, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kMacvlanDataPolicy = {
    {IFLA_MACVLAN_BC_QUEUE_LEN, MNL_TYPE_U32},
};

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
  if (tb[IFLA_LINKINFO]) {
    auto info = PLUMB_TRY(netlink::parse_nested(tb[IFLA_LINKINFO], IFLA_INFO_MAX, kLinkInfoPolicy));
    if (info[IFLA_INFO_KIND]) li.kind = mnl_attr_get_str(info[IFLA_INFO_KIND]);
    if (li.kind == "macvlan" && info[IFLA_INFO_DATA]) {
      auto data = PLUMB_TRY(netlink::parse_nested(info[IFLA_INFO_DATA], IFLA_MACVLAN_MAX, kMacvlanDataPolicy));
      if (data[IFLA_MACVLAN_BC_QUEUE_LEN]) li.macvlan_bc_queue_len = mnl_attr_get_u32(data[IFLA_MACVLAN_BC_QUEUE_LEN]);
    }
  }
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

bool valid_ifname(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return false;
  if (name == "." || name == "..") return false;
  for (char c : name) {
    // '%' would make the kernel pick a numbered name (dev_alloc_name) instead of this one.
    if (c == '/' || c == ':' || c == '%' || c == '\0' || c == ' ' || (c >= '\t' && c <= '\r')) return false;
  }
  return true;
}

Result<std::optional<LinkInfo>> get(netlink::Socket& nl, const std::string& name) {
  std::string what = "get link " + name;
  PLUMB_TRY(check_name(name, "interface name", what));
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
//   ifinfomsg { AF_UNSPEC, index 0 }
//   IFLA_IFNAME      "host_name\0"
//   [IFLA_MTU        u32]
//   [IFLA_ADDRESS    6 bytes host_mac]
//   IFLA_LINKINFO (nested)
//   +-- IFLA_INFO_KIND  "veth\0"
//   +-- IFLA_INFO_DATA (nested)
//       +-- VETH_INFO_PEER (nested; payload starts with a full ifinfomsg)
//           ifinfomsg { AF_UNSPEC, index 0 }
//           IFLA_IFNAME     "peer_name\0"       final name: no rename after the move
//           [IFLA_NET_NS_FD u32 peer_netns_fd]  peer is born in that namespace
//           [IFLA_MTU       u32]
//           [IFLA_ADDRESS   6 bytes peer_mac]
//
// Nests carry NLA_F_NESTED (libmnl sets it); the kernel masks it for these liberal policies.
Message build_create_veth(const VethSpec& spec) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, AF_UNSPEC, 0);
  m.put_str(IFLA_IFNAME, spec.host_name);
  if (spec.mtu_bytes != 0) m.put_u32(IFLA_MTU, spec.mtu_bytes);
  if (spec.host_mac) m.put(IFLA_ADDRESS, spec.host_mac->bytes.data(), spec.host_mac->bytes.size());
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
  }
  return m;
}

Status create_veth(netlink::Socket& nl, const VethSpec& spec) {
  std::string what = "create veth pair " + spec.host_name + "/" + spec.peer_name;
  if (spec.peer_netns_fd >= 0) what += " (peer in netns fd " + std::to_string(spec.peer_netns_fd) + ")";
  PLUMB_TRY(check_name(spec.host_name, "host interface name", what));
  PLUMB_TRY(check_name(spec.peer_name, "peer interface name", what));
  Message m = build_create_veth(spec);
  return classify_create(nl.request(m, what));
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
  PLUMB_TRY(check_name(name, "interface name", what));
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

}  // namespace plumb::link
