// PF-side VF settings: the messages, the VF report reader and NetlinkPfOps (engine/kernel/vf.hpp).
#include "engine/kernel/vf.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/kernel/link.hpp"

namespace plumb::vf {
namespace {

using netlink::AttrPolicy;
using netlink::Message;
using Kind = VfSetting::Kind;

struct KindName {
  Kind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {Kind::Mac, "mac"},         {Kind::Vlan, "vlan"},          {Kind::VlanList, "vlan_list"},
    {Kind::Rate, "rate"},       {Kind::SpoofChk, "spoofchk"},  {Kind::Trust, "trust"},
    {Kind::LinkState, "state"}, {Kind::NodeGuid, "node_guid"}, {Kind::PortGuid, "port_guid"},
};

const char* kind_name(Kind k) {
  for (auto& kn : kKindNames) {
    if (kn.kind == k) return kn.name;
  }
  return "?";
}

const char* link_state_name(LinkState s) {
  switch (s) {
    case LinkState::Auto:
      return "auto";
    case LinkState::Enable:
      return "enable";
    case LinkState::Disable:
      return "disable";
  }
  return "?";
}

/// Attributes of IFLA_VF_INFO we read, each checked for the size of its struct.
const std::vector<AttrPolicy> kVfInfoPolicy = {
    {IFLA_VF_MAC, MNL_TYPE_BINARY, sizeof(ifla_vf_mac)},
    {IFLA_VF_VLAN, MNL_TYPE_BINARY, sizeof(ifla_vf_vlan)},
    {IFLA_VF_VLAN_LIST, MNL_TYPE_NESTED, 0},
    {IFLA_VF_SPOOFCHK, MNL_TYPE_BINARY, sizeof(ifla_vf_spoofchk)},
    {IFLA_VF_LINK_STATE, MNL_TYPE_BINARY, sizeof(ifla_vf_link_state)},
    {IFLA_VF_RATE, MNL_TYPE_BINARY, sizeof(ifla_vf_rate)},
    {IFLA_VF_TRUST, MNL_TYPE_BINARY, sizeof(ifla_vf_trust)},
    {IFLA_VF_IB_NODE_GUID, MNL_TYPE_BINARY, sizeof(ifla_vf_guid)},
    {IFLA_VF_IB_PORT_GUID, MNL_TYPE_BINARY, sizeof(ifla_vf_guid)},
};
const std::vector<AttrPolicy> kLinkVfPolicy = {
    {IFLA_VFINFO_LIST, MNL_TYPE_NESTED, 0},
};

using netlink::for_each_nested;

template <class T>
T payload_as(const nlattr* a) {
  T v;
  std::memcpy(&v, mnl_attr_get_payload(a), sizeof v);
  return v;
}

bool is_set(uint32_t setting) { return setting != UINT32_MAX; }

/// The u64 of a GUID's text form (8 colon-separated hex bytes, first most significant), zero
/// allowed; nullopt when the text is not that.
std::optional<uint64_t> guid_bytes(std::string_view text) {
  auto bytes = parse_hwaddr(text);
  if (!bytes || bytes->size() != 8) return std::nullopt;
  uint64_t g = 0;
  for (uint8_t b : *bytes) g = (g << 8) | b;
  return g;
}

}  // namespace

std::string VfSetting::describe() const {
  std::string s = "vf " + std::to_string(vf) + " ";
  switch (kind) {
    case Kind::Mac:
      return s + "mac " + mac.str();
    case Kind::Vlan:
      return s + "vlan " + std::to_string(vlan) + " qos " + std::to_string(qos);
    case Kind::VlanList:
      return s + "vlan " + std::to_string(vlan) + " qos " + std::to_string(qos) + " proto " +
             (vlan_proto == ETH_P_8021AD ? "802.1ad" : "802.1q");
    case Kind::Rate:
      return s + "min_tx_rate " + std::to_string(min_tx_rate) + " max_tx_rate " + std::to_string(max_tx_rate);
    case Kind::SpoofChk:
      return s + "spoofchk " + (on ? "on" : "off");
    case Kind::Trust:
      return s + "trust " + (on ? "on" : "off");
    case Kind::LinkState:
      return s + "state " + link_state_name(link_state);
    case Kind::NodeGuid:
      return s + "node_guid " + format_guid(guid);
    case Kind::PortGuid:
      return s + "port_guid " + format_guid(guid);
  }
  return s;
}

json::Value VfSetting::to_json(json::Document::AllocatorType& a) const {
  json::Value o(rapidjson::kObjectType);
  o.AddMember("kind", json::Value(kind_name(kind), a), a);
  o.AddMember("vf", vf, a);
  switch (kind) {
    case Kind::Mac:
      o.AddMember("mac", json::Value(mac.str().c_str(), a), a);
      break;
    case Kind::Vlan:
    case Kind::VlanList:
      o.AddMember("vlan", vlan, a);
      o.AddMember("qos", qos, a);
      o.AddMember("proto", static_cast<unsigned>(vlan_proto), a);
      break;
    case Kind::Rate:
      o.AddMember("min_tx_rate", min_tx_rate, a);
      o.AddMember("max_tx_rate", max_tx_rate, a);
      break;
    case Kind::SpoofChk:
    case Kind::Trust:
      o.AddMember("on", on, a);
      break;
    case Kind::LinkState:
      o.AddMember("state", static_cast<unsigned>(link_state), a);
      break;
    case Kind::NodeGuid:
    case Kind::PortGuid:
      o.AddMember("guid", json::Value(format_guid(guid).c_str(), a), a);
      break;
  }
  return o;
}

Result<VfSetting> VfSetting::from_json(const json::Value& v) {
  const std::string where = "VF setting " + (v.IsObject() ? json::quote(v) : std::string("(not an object)"));
  if (!v.IsObject()) return fail(cni_code::kDecode, where);
  auto kind = PLUMB_TRY(json::get_string(v, "kind", where));
  auto vf = PLUMB_TRY(json::get_uint(v, "vf", where));
  if (!kind || !vf || *vf > UINT32_MAX) return fail(cni_code::kDecode, where + " lacks \"kind\" or \"vf\"");
  VfSetting s;
  bool known = false;
  for (auto& kn : kKindNames) {
    if (*kind == kn.name) {
      s.kind = kn.kind;
      known = true;
    }
  }
  if (!known) return fail(cni_code::kDecode, where + ": unknown kind \"" + *kind + "\"");
  s.vf = static_cast<uint32_t>(*vf);
  auto u32 = [&](const char* key) -> Result<uint32_t> {
    auto x = PLUMB_TRY(json::get_uint(v, key, where));
    if (!x || *x > UINT32_MAX) return fail(cni_code::kDecode, where + " lacks \"" + key + "\"");
    return static_cast<uint32_t>(*x);
  };
  switch (s.kind) {
    case Kind::Mac: {
      auto m = PLUMB_TRY(json::get_string(v, "mac", where));
      if (!m) return fail(cni_code::kDecode, where + " lacks \"mac\"");
      s.mac = PLUMB_TRY(Mac::parse(*m));
      break;
    }
    case Kind::Vlan:
    case Kind::VlanList:
      s.vlan = PLUMB_TRY(u32("vlan"));
      s.qos = PLUMB_TRY(u32("qos"));
      s.vlan_proto = static_cast<uint16_t>(PLUMB_TRY(u32("proto")));
      break;
    case Kind::Rate:
      s.min_tx_rate = PLUMB_TRY(u32("min_tx_rate"));
      s.max_tx_rate = PLUMB_TRY(u32("max_tx_rate"));
      break;
    case Kind::SpoofChk:
    case Kind::Trust: {
      auto on = PLUMB_TRY(json::get_bool(v, "on", where));
      if (!on) return fail(cni_code::kDecode, where + " lacks \"on\"");
      s.on = *on;
      break;
    }
    case Kind::LinkState: {
      uint32_t st = PLUMB_TRY(u32("state"));
      if (st > 2) return fail(cni_code::kDecode, where + ": link state " + std::to_string(st) + " is not 0..2");
      s.link_state = static_cast<LinkState>(st);
      break;
    }
    case Kind::NodeGuid:
    case Kind::PortGuid: {
      auto g = PLUMB_TRY(json::get_string(v, "guid", where));
      if (!g) return fail(cni_code::kDecode, where + " lacks \"guid\"");
      // A saved GUID may legitimately be all zero (never assigned): parse without that rule.
      auto guid = guid_bytes(*g);
      if (!guid) return fail(cni_code::kDecode, where + ": bad guid");
      s.guid = *guid;
      break;
    }
  }
  return s;
}

namespace {

/// The one attribute of `s` (the table in vf.hpp), into the open IFLA_VF_INFO nest of `m`.
void put_vf_attr(Message& m, const VfSetting& s) {
  switch (s.kind) {
    case Kind::Mac: {
      ifla_vf_mac v{};
      v.vf = s.vf;
      std::memcpy(v.mac, s.mac.bytes.data(), s.mac.bytes.size());
      m.put(IFLA_VF_MAC, &v, sizeof v);
      break;
    }
    case Kind::Vlan: {
      ifla_vf_vlan v{s.vf, s.vlan, s.qos};
      m.put(IFLA_VF_VLAN, &v, sizeof v);
      break;
    }
    case Kind::VlanList: {
      Message::Nest vl(m, IFLA_VF_VLAN_LIST);
      ifla_vf_vlan_info v{};
      v.vf = s.vf;
      v.vlan = s.vlan;
      v.qos = s.qos;
      v.vlan_proto = htons(s.vlan_proto);
      m.put(IFLA_VF_VLAN_INFO, &v, sizeof v);
      break;
    }
    case Kind::Rate: {
      ifla_vf_rate v{s.vf, s.min_tx_rate, s.max_tx_rate};
      m.put(IFLA_VF_RATE, &v, sizeof v);
      break;
    }
    case Kind::SpoofChk: {
      ifla_vf_spoofchk v{s.vf, s.on ? 1u : 0u};
      m.put(IFLA_VF_SPOOFCHK, &v, sizeof v);
      break;
    }
    case Kind::Trust: {
      ifla_vf_trust v{s.vf, s.on ? 1u : 0u};
      m.put(IFLA_VF_TRUST, &v, sizeof v);
      break;
    }
    case Kind::LinkState: {
      ifla_vf_link_state v{s.vf, static_cast<uint32_t>(s.link_state)};
      m.put(IFLA_VF_LINK_STATE, &v, sizeof v);
      break;
    }
    case Kind::NodeGuid:
    case Kind::PortGuid: {
      ifla_vf_guid v{};
      v.vf = s.vf;
      v.guid = s.guid;
      m.put(s.kind == Kind::NodeGuid ? IFLA_VF_IB_NODE_GUID : IFLA_VF_IB_PORT_GUID, &v, sizeof v);
      break;
    }
  }
}

}  // namespace

//   nlmsghdr  RTM_NEWLINK, REQUEST (+ ACK by the socket)
//   ifinfomsg AF_UNSPEC, ifi_index = the PF
//   IFLA_VFINFO_LIST (22, nest)
//     IFLA_VF_INFO (1, nest)
//       one attribute: IFLA_VF_MAC | VLAN | VLAN_LIST{VLAN_INFO} | RATE | SPOOFCHK | TRUST | LINK_STATE
//                      | IB_NODE_GUID | IB_PORT_GUID, each `struct ifla_vf_* {u32 vf; ...}` (sizes in vf.hpp)
Message build_vf_setting(int pf_index, const VfSetting& s) {
  Message m(RTM_NEWLINK, 0);
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = pf_index;
  // The nests must close (fix up their lengths) before the message is returned.
  {
    Message::Nest list(m, IFLA_VFINFO_LIST);
    Message::Nest info(m, IFLA_VF_INFO);
    put_vf_attr(m, s);
  }
  return m;
}

Message build_get_vfs(int pf_index) {
  Message m(RTM_GETLINK, 0);
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = pf_index;
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS);
  return m;
}

namespace {

/// The first entry of an IFLA_VF_VLAN_LIST into s (vlan, qos, proto). Errors: ERANGE for a short
/// IFLA_VF_VLAN_INFO.
Status read_vlan_list(const nlattr* list, VfState& s, const std::string& pf) {
  bool first = true;
  return for_each_nested(list, [&](const nlattr* e) -> Status {
    if (mnl_attr_get_type(e) != IFLA_VF_VLAN_INFO || !first) return {};
    if (mnl_attr_get_payload_len(e) < sizeof(ifla_vf_vlan_info)) {
      return fail_errno(ERANGE, "parse VF " + std::to_string(s.vf) + " of " + pf + ": IFLA_VF_VLAN_INFO is short");
    }
    auto v = payload_as<ifla_vf_vlan_info>(e);
    s.vlan = v.vlan;
    s.qos = v.qos;
    s.vlan_proto = ntohs(v.vlan_proto);
    first = false;
    return {};
  });
}

/// One IFLA_VF_INFO: its VfState when it describes VF `vf`, nullopt for another VF (or one
/// without IFLA_VF_MAC, which every kernel sends). Errors: malformed attributes.
Result<std::optional<VfState>> read_vf_info(const nlattr* a, uint32_t vf, const std::string& pf) {
  auto info = PLUMB_TRY(netlink::parse_nested(a, IFLA_VF_MAX, kVfInfoPolicy));
  if (info[IFLA_VF_MAC] == nullptr) return std::optional<VfState>{};
  auto mac = payload_as<ifla_vf_mac>(info[IFLA_VF_MAC]);
  if (mac.vf != vf) return std::optional<VfState>{};
  VfState s;
  s.vf = vf;
  Mac m;
  std::memcpy(m.bytes.data(), mac.mac, m.bytes.size());
  s.mac = m;
  if (info[IFLA_VF_VLAN] != nullptr) {
    auto v = payload_as<ifla_vf_vlan>(info[IFLA_VF_VLAN]);
    s.vlan = v.vlan;
    s.qos = v.qos;
  }
  if (info[IFLA_VF_VLAN_LIST] != nullptr) PLUMB_TRY(read_vlan_list(info[IFLA_VF_VLAN_LIST], s, pf));
  if (info[IFLA_VF_SPOOFCHK] != nullptr) {
    auto v = payload_as<ifla_vf_spoofchk>(info[IFLA_VF_SPOOFCHK]);
    if (is_set(v.setting)) s.spoofchk = v.setting != 0;
  }
  if (info[IFLA_VF_TRUST] != nullptr) {
    auto v = payload_as<ifla_vf_trust>(info[IFLA_VF_TRUST]);
    if (is_set(v.setting)) s.trust = v.setting != 0;
  }
  if (info[IFLA_VF_LINK_STATE] != nullptr) {
    auto v = payload_as<ifla_vf_link_state>(info[IFLA_VF_LINK_STATE]);
    if (v.link_state <= 2) s.link_state = static_cast<LinkState>(v.link_state);
  }
  if (info[IFLA_VF_RATE] != nullptr) {
    auto v = payload_as<ifla_vf_rate>(info[IFLA_VF_RATE]);
    s.min_tx_rate = v.min_tx_rate;
    s.max_tx_rate = v.max_tx_rate;
  }
  if (info[IFLA_VF_IB_NODE_GUID] != nullptr) s.node_guid = payload_as<ifla_vf_guid>(info[IFLA_VF_IB_NODE_GUID]).guid;
  if (info[IFLA_VF_IB_PORT_GUID] != nullptr) s.port_guid = payload_as<ifla_vf_guid>(info[IFLA_VF_IB_PORT_GUID]).guid;
  return std::optional<VfState>(s);
}

}  // namespace

Result<VfState> parse_vf_state(const nlmsghdr* reply, uint32_t vf, const std::string& pf) {
  auto tb = PLUMB_TRY(netlink::parse_attrs(reply, sizeof(ifinfomsg), IFLA_MAX, kLinkVfPolicy));
  if (tb[IFLA_VFINFO_LIST] == nullptr) {
    return fail(cni_code::kKernelFeature, "PF " + pf +
                                              " reports no VFs (RTM_GETLINK with RTEXT_FILTER_VF): it is not an SR-IOV "
                                              "physical function, or its driver does not report VF settings");
  }
  std::optional<VfState> found;
  auto st = for_each_nested(tb[IFLA_VFINFO_LIST], [&](const nlattr* a) -> Status {
    if (mnl_attr_get_type(a) != IFLA_VF_INFO) return {};
    if (auto s = PLUMB_TRY(read_vf_info(a, vf, pf))) found = s;
    return {};
  });
  if (!st) return std::unexpected(st.error().within("read the VF settings of PF " + pf));
  if (!found) {
    return fail(cni_code::kKernelFeature,
                "PF " + pf + " reports no VF " + std::to_string(vf) + " (check sriov_numvfs and the VF index)");
  }
  return *found;
}

std::optional<VfSetting> restore_of(const VfSetting& applied, const VfState& saved) {
  VfSetting r;
  r.kind = applied.kind;
  r.vf = applied.vf;
  switch (applied.kind) {
    case Kind::Mac:
      if (!saved.mac) return std::nullopt;
      r.mac = *saved.mac;
      return r;
    case Kind::Vlan:
    case Kind::VlanList:
      r.vlan = saved.vlan;
      r.qos = saved.qos;
      r.vlan_proto = saved.vlan_proto;
      // A saved 802.1ad VLAN can only be restored through the VLAN list.
      if (saved.vlan_proto != ETH_P_8021Q) r.kind = Kind::VlanList;
      return r;
    case Kind::Rate:
      r.min_tx_rate = saved.min_tx_rate;
      r.max_tx_rate = saved.max_tx_rate;
      return r;
    case Kind::SpoofChk:
      if (!saved.spoofchk) return std::nullopt;
      r.on = *saved.spoofchk;
      return r;
    case Kind::Trust:
      if (!saved.trust) return std::nullopt;
      r.on = *saved.trust;
      return r;
    case Kind::LinkState:
      if (!saved.link_state) return std::nullopt;
      r.link_state = *saved.link_state;
      return r;
    case Kind::NodeGuid:
      if (!saved.node_guid) return std::nullopt;
      r.guid = *saved.node_guid;
      return r;
    case Kind::PortGuid:
      if (!saved.port_guid) return std::nullopt;
      r.guid = *saved.port_guid;
      return r;
  }
  return std::nullopt;
}

Result<int> NetlinkPfOps::index_of(const std::string& pf) {
  auto l = PLUMB_TRY(link::get(node_, pf));
  if (!l) return fail(cni_code::kNotFound, "PF netdev " + pf + " does not exist in the node namespace");
  return l->index;
}

Result<VfState> NetlinkPfOps::get_vf(const std::string& pf, uint32_t vf) {
  int index = PLUMB_TRY(index_of(pf));
  Message m = build_get_vfs(index);
  std::optional<Result<VfState>> out;
  auto st = node_.query(m, "read VF settings of PF " + pf, [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type == RTM_NEWLINK && !out) out = parse_vf_state(nlh, vf, pf);
    return {};
  });
  if (!st) return std::unexpected(st.error());
  if (!out) return fail(cni_code::kKernel, "read VF settings of PF " + pf + ": no RTM_NEWLINK in the reply");
  return std::move(*out);
}

Status NetlinkPfOps::set(const std::string& pf, const VfSetting& s) {
  int index = PLUMB_TRY(index_of(pf));
  Message m = build_vf_setting(index, s);
  std::string what = "set " + s.describe() + " on PF " + pf;
  auto st = node_.request(m, what);
  if (!st && st.error().sys_errno == EOPNOTSUPP) {
    return fail(cni_code::kKernelFeature, what + ": the PF's driver does not support this VF setting (EOPNOTSUPP)",
                st.error().details);
  }
  if (!st && st.error().sys_errno == EPROTONOSUPPORT) {
    return fail(cni_code::kKernelFeature,
                what + ": the PF's driver does not support this VLAN protocol on VFs (EPROTONOSUPPORT)",
                st.error().details);
  }
  if (!st && st.error().sys_errno == EINVAL && s.kind == Kind::Rate) {
    // igb: no min_tx_rate at all, and a max_tx_rate only while the PF has link.
    Error e = st.error();
    e.msg +=
        " (the PF's driver refused these rates: not every driver takes a min_tx_rate, and some take a "
        "max_tx_rate only while the PF has link)";
    return std::unexpected(e);
  }
  return st;
}

Result<uint64_t> parse_guid(std::string_view text, const std::string& what) {
  auto g = guid_bytes(text);
  const std::string quoted = what + " \"" + std::string(text) + "\" ";
  if (!g) return fail(cni_code::kInvalidConfig, quoted + "is not an 8-byte GUID (xx:xx:xx:xx:xx:xx:xx:xx)");
  if (*g == 0) return fail(cni_code::kInvalidConfig, quoted + "is all zero, which is not a valid GUID");
  return *g;
}

std::string format_guid(uint64_t guid) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x", unsigned(guid >> 56) & 0xff,
                unsigned(guid >> 48) & 0xff, unsigned(guid >> 40) & 0xff, unsigned(guid >> 32) & 0xff,
                unsigned(guid >> 24) & 0xff, unsigned(guid >> 16) & 0xff, unsigned(guid >> 8) & 0xff,
                unsigned(guid) & 0xff);
  return buf;
}

Result<uint64_t> guid_from_ipoib_hwaddr(const std::vector<uint8_t>& hwaddr, const std::string& ifname) {
  if (hwaddr.size() != 20) {
    return fail(cni_code::kInvalidConfig,
                "interface " + ifname + " has a " + std::to_string(hwaddr.size()) +
                    "-byte hardware address, not a 20-byte IPoIB address: cannot read its GUID");
  }
  uint64_t g = 0;
  for (size_t i = 12; i < 20; ++i) g = (g << 8) | hwaddr[i];
  return g;
}

}  // namespace plumb::vf
