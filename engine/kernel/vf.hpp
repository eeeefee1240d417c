// PF-side VF settings (SR-IOV and InfiniBand SR-IOV), a typed kernel object: what the kernel
// reports for a VF, the one setting per message plumb sends through the PF, and the PfOps
// interface the drivers use, so flow tests can record the sequence (save, apply in order, restore)
// with a fake while the plumb binary talks rtnetlink (NetlinkPfOps). Facts: specs/README.md,
// "SR-IOV / InfiniBand / vDPA kernel interfaces".
//
// Every setting is one RTM_NEWLINK on the PF (ifinfomsg.ifi_index = PF index):
//
//   ifinfomsg | IFLA_VFINFO_LIST(22) { IFLA_VF_INFO(1) { <one attribute> } }
//
//   IFLA_VF_MAC(1)          struct ifla_vf_mac   {u32 vf; u8 mac[32];}               36 B
//   IFLA_VF_VLAN(2)         struct ifla_vf_vlan  {u32 vf; u32 vlan; u32 qos;}         12 B
//   IFLA_VF_VLAN_LIST(12) { IFLA_VF_VLAN_INFO(1) struct ifla_vf_vlan_info
//                                        {u32 vf; u32 vlan; u32 qos; __be16 proto;}    16 B }
//   IFLA_VF_SPOOFCHK(4)     struct ifla_vf_spoofchk {u32 vf; u32 setting;}            8 B
//   IFLA_VF_LINK_STATE(5)   struct ifla_vf_link_state {u32 vf; u32 link_state;}      8 B
//   IFLA_VF_RATE(6)         struct ifla_vf_rate  {u32 vf; u32 min_tx_rate; u32 max_tx_rate;} 12 B
//   IFLA_VF_TRUST(9)        struct ifla_vf_trust {u32 vf; u32 setting;}               8 B
//   IFLA_VF_IB_NODE_GUID(10) / IFLA_VF_IB_PORT_GUID(11)
//                           struct ifla_vf_guid  {u32 vf; u64 guid;}                  16 B
//
// The kernel (do_setvfinfo) applies the attributes of one IFLA_VF_INFO in a fixed order and stops
// at the first error, so one attribute per message keeps each step's error attributable; node and
// port GUID must be separate messages anyway.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::vf {

/// VF link state values (IFLA_VF_LINK_STATE_*).
enum class LinkState : uint32_t { Auto = 0, Enable = 1, Disable = 2 };

/// One PF-side setting of one VF: exactly one attribute in one message (layout above).
struct VfSetting {
  enum class Kind { Mac, Vlan, VlanList, Rate, SpoofChk, Trust, LinkState, NodeGuid, PortGuid };
  Kind kind = Kind::Mac;
  uint32_t vf = 0;                         ///< the VF index N (the PF's virtfnN link)
  Mac mac;                                 ///< Mac
  uint32_t vlan = 0;                       ///< Vlan, VlanList: 0..4095
  uint32_t qos = 0;                        ///< Vlan, VlanList: 0..7
  uint16_t vlan_proto = 0x8100;            ///< VlanList: ETH_P_8021Q or ETH_P_8021AD (host order here)
  uint32_t min_tx_rate = 0;                ///< Rate, Mbit/s
  uint32_t max_tx_rate = 0;                ///< Rate, Mbit/s
  bool on = false;                         ///< SpoofChk, Trust
  LinkState link_state = LinkState::Auto;  ///< LinkState
  uint64_t guid = 0;                       ///< NodeGuid, PortGuid: first byte of the text form most significant

  /// "vf 0 mac 02:..", "vf 0 vlan 100 qos 3 proto 802.1ad" ... in `ip link` words, for messages.
  [[nodiscard]] std::string describe() const;
  /// JSON form recorded in undo operations and allocation records:
  /// {"kind": "mac"|"vlan"|"vlan_list"|"rate"|"spoofchk"|"trust"|"state"|"node_guid"|"port_guid",
  ///  "vf": N, <the kind's fields>}.
  [[nodiscard]] json::Value to_json(json::Document::AllocatorType& a) const;
  /// Reads to_json()'s form. Errors: kDecode naming the missing or bad field.
  [[nodiscard]] static Result<VfSetting> from_json(const json::Value& v);
  bool operator==(const VfSetting&) const = default;
};

/// What the PF reports for one VF (RTM_GETLINK with IFLA_EXT_MASK = RTEXT_FILTER_VF).
/// Fields the kernel or the driver does not report are nullopt.
struct VfState {
  uint32_t vf = 0;
  std::optional<Mac> mac;        ///< the administrative MAC (IFLA_VF_MAC, first 6 bytes)
  uint32_t vlan = 0, qos = 0;    ///< IFLA_VF_VLAN_LIST's first entry, else IFLA_VF_VLAN
  uint16_t vlan_proto = 0x8100;  ///< host order
  std::optional<bool> spoofchk;  ///< the kernel reports setting (u32)-1 when the driver cannot tell
  std::optional<bool> trust;
  std::optional<LinkState> link_state;
  uint32_t min_tx_rate = 0, max_tx_rate = 0;     ///< Mbit/s (IFLA_VF_RATE)
  std::optional<uint64_t> node_guid, port_guid;  ///< IFLA_VF_IB_NODE_GUID/PORT_GUID (mlx5)
};

/// The RTM_NEWLINK that applies `s` on the PF with ifindex `pf_index` (flags REQUEST; the socket
/// adds ACK): ifinfomsg + IFLA_VFINFO_LIST > IFLA_VF_INFO > one attribute, as sketched above.
[[nodiscard]] netlink::Message build_vf_setting(int pf_index, const VfSetting& s);
/// RTM_GETLINK for ifindex `pf_index` with IFLA_EXT_MASK = RTEXT_FILTER_VF|RTEXT_FILTER_SKIP_STATS.
[[nodiscard]] netlink::Message build_get_vfs(int pf_index);
/// Reads VF `vf` out of an RTM_NEWLINK reply, every attribute policy-validated. `pf` names the PF
/// in errors. Errors: kKernelFeature when the reply has no IFLA_VFINFO_LIST or no entry for `vf`
/// (not an SR-IOV PF, or the VF does not exist), naming `pf`; EINVAL/ERANGE for malformed
/// attributes.
[[nodiscard]] Result<VfState> parse_vf_state(const nlmsghdr* reply, uint32_t vf, const std::string& pf);

/// The setting that restores what `saved` says for the kind of `applied` (same kind and VF; a
/// saved 802.1ad VLAN comes back as a VlanList setting); nullopt when the PF did not report that
/// value (nothing to restore it to).
[[nodiscard]] std::optional<VfSetting> restore_of(const VfSetting& applied, const VfState& saved);

/// PF-side operations of one node. Implementations: NetlinkPfOps (rtnetlink, the plumb binary)
/// and a recording fake in the tests (tests/support/sriov_fakes.hpp).
class PfOps {
 public:
  virtual ~PfOps() = default;
  /// The current settings of VF `vf` of PF netdev `pf`. Errors as parse_vf_state; kNotFound when
  /// the PF netdev does not exist.
  [[nodiscard]] virtual Result<VfState> get_vf(const std::string& pf, uint32_t vf) = 0;
  /// Applies one setting (one message). Errors: kNotFound when the PF netdev does not exist;
  /// kKernelFeature when the PF's driver does not support it (EOPNOTSUPP; EPROTONOSUPPORT for an
  /// 802.1ad VLAN), naming the PF and the setting; the kernel's errno otherwise.
  [[nodiscard]] virtual Status set(const std::string& pf, const VfSetting& s) = 0;
};

/// PfOps over an rtnetlink socket of the node namespace (the PF is looked up by name each call).
class NetlinkPfOps final : public PfOps {
 public:
  explicit NetlinkPfOps(netlink::Socket& node) : node_(node) {}
  Result<VfState> get_vf(const std::string& pf, uint32_t vf) override;
  Status set(const std::string& pf, const VfSetting& s) override;

 private:
  Result<int> index_of(const std::string& pf);
  netlink::Socket& node_;
};

/// Parses a GUID "00:11:22:33:44:55:66:77" (8 colon-separated hex bytes, as iproute2's get_guid)
/// into its u64 (first byte most significant). Errors: kInvalidConfig naming `what` and the text
/// when it is not 8 bytes or is all zero.
[[nodiscard]] Result<uint64_t> parse_guid(std::string_view text, const std::string& what);
/// Formats a GUID as lower-case colon-separated bytes ("00:11:22:33:44:55:66:77").
[[nodiscard]] std::string format_guid(uint64_t guid);
/// The port GUID inside an IPoIB hardware address (the last 8 of its 20 bytes). Errors:
/// kInvalidConfig naming `ifname` when the address is not 20 bytes (not an IPoIB interface).
[[nodiscard]] Result<uint64_t> guid_from_ipoib_hwaddr(const std::vector<uint8_t>& hwaddr, const std::string& ifname);

}  // namespace plumb::vf
