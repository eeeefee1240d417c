#include "engine/kernel/bridge_port.hpp"

#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace plumb::bridge_port {
namespace {

using netlink::Message;

ifinfomsg* put_bridge_ifinfo(Message& m, int index) {
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_family = AF_BRIDGE;
  ifi->ifi_index = index;
  return ifi;
}

std::string describe(const PortVlan& v) {
  return "vid " + std::to_string(v.vid) + (v.pvid ? " pvid" : "") + (v.untagged ? " untagged" : "");
}

}  // namespace

Message build_port_vlan(int index, const PortVlan& v, bool add) {
  Message m(add ? RTM_SETLINK : RTM_DELLINK, 0);
  put_bridge_ifinfo(m, index);
  {
    Message::Nest spec(m, IFLA_AF_SPEC);
    m.put_u16(IFLA_BRIDGE_FLAGS, BRIDGE_FLAGS_MASTER);
    bridge_vlan_info info{};
    info.flags = static_cast<uint16_t>((v.pvid ? BRIDGE_VLAN_INFO_PVID : 0) | (v.untagged ? BRIDGE_VLAN_INFO_UNTAGGED : 0));
    info.vid = v.vid;
    m.put(IFLA_BRIDGE_VLAN_INFO, &info, sizeof info);
  }
  return m;
}

Status add_vlan(netlink::Socket& nl, int index, const PortVlan& v) {
  Message m = build_port_vlan(index, v, true);
  auto st = nl.request(m, "add VLAN " + describe(v) + " to bridge port index " + std::to_string(index));
  if (!st && st.error().sys_errno == EOPNOTSUPP) st.error().cni_code = cni_code::kKernelFeature;
  return st;
}

Status del_vlan(netlink::Socket& nl, int index, uint16_t vid) {
  Message m = build_port_vlan(index, PortVlan{vid, false, false}, false);
  auto st = nl.request(m, "remove VLAN " + std::to_string(vid) + " from bridge port index " + std::to_string(index));
  if (!st && st.error().sys_errno == ENOENT) return {};
  return st;
}

Result<std::vector<PortVlan>> vlans(netlink::Socket& nl, int index) {
  std::vector<PortVlan> out;
  Message m(RTM_GETLINK, NLM_F_DUMP);
  put_bridge_ifinfo(m, 0);
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_BRVLAN);
  PLUMB_TRY(nl.dump(m, "dump bridge port VLANs", [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWLINK) return {};
    const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
    if (ifi->ifi_index != index) return {};
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(ifinfomsg), IFLA_MAX, {{IFLA_AF_SPEC, MNL_TYPE_NESTED}}));
    if (tb[IFLA_AF_SPEC] == nullptr) return {};
    return netlink::for_each_nested(tb[IFLA_AF_SPEC], [&](const nlattr* a) -> Status {
      if (mnl_attr_get_type(a) != IFLA_BRIDGE_VLAN_INFO) return {};
      if (mnl_attr_validate2(a, MNL_TYPE_BINARY, sizeof(bridge_vlan_info)) < 0) {
        return fail(cni_code::kKernel, "bridge port index " + std::to_string(index) + ": malformed IFLA_BRIDGE_VLAN_INFO");
      }
      bridge_vlan_info info{};
      std::memcpy(&info, mnl_attr_get_payload(a), sizeof info);
      out.push_back({info.vid, (info.flags & BRIDGE_VLAN_INFO_PVID) != 0, (info.flags & BRIDGE_VLAN_INFO_UNTAGGED) != 0});
      return {};
    });
  }));
  std::sort(out.begin(), out.end(), [](const PortVlan& a, const PortVlan& b) { return a.vid < b.vid; });
  return out;
}

Status set_isolated(netlink::Socket& nl, int index, bool isolated) {
  Message m(RTM_SETLINK, 0);
  put_bridge_ifinfo(m, index);
  {
    Message::Nest protinfo(m, IFLA_PROTINFO);
    m.put_u8(IFLA_BRPORT_ISOLATED, isolated ? 1 : 0);
  }
  return nl.request(m, std::string("set isolated ") + (isolated ? "on" : "off") + " on bridge port index " + std::to_string(index));
}

}  // namespace plumb::bridge_port
