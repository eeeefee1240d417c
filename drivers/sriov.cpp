// sriov-cni, natively. Keys: deviceID (or runtimeConfig.deviceID), vlan, vlanQoS, vlanProto
// (802.1q/802.1ad), mac (runtimeConfig.mac wins), spoofchk, trust (on/off), link_state
// (auto/enable/disable), min_tx_rate, max_tx_rate (Mbit/s), mtu, ipam.
//
// ADD: VF and PF from sysfs; the VF claimed (lock + allocation record); its current PF-side
// settings read and saved (RTM_GETLINK, RTEXT_FILTER_VF); the requested ones applied through the PF
// one attribute per message in sriov-cni's order (vlan, mac, rate, spoofchk, trust, link state);
// the VF netdev moved into the pod and renamed in one message, MAC/MTU set, up; IPAM. A MAC set
// through the PF reaches the VF netdev before the move (vf_attach::take_pf_mac: set on the netdev,
// or, where the VF driver refuses it as igbvf does, by reloading the VF driver).
// A VF bound to vfio-pci, uio_pci_generic or igb_uio has no netdev: PF settings and IPAM only, and
// that mode is what the recorded undo operations describe, so DEL never looks for a netdev.
// A VF whose PF is not reachable (no physfn link: a VF passed through into a VM, sriov-cni PR #121)
// attaches like host-device (netdev moved, MAC/MTU on the netdev, IPAM); the PF-side keys asked for
// (vlan, vlanQoS, vlanProto, spoofchk, trust, link_state, min_tx_rate, max_tx_rate) are refused, each by name.
// DEL (the undo log, newest first): addresses released, saved VF settings restored through the PF
// (in sriov-cni's reset order: vlan, spoofchk, mac, trust, rate, link state), netdev returned
// under its original name, MAC and MTU, VF released. The VF steps shared with ib-sriov and vdpa
// are drivers/vf_attach.hpp's.
#include <linux/if_ether.h>
#include <strings.h>

#include "drivers/registry.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/vf.hpp"

namespace plumb::drivers {
namespace {

using vf::LinkState;
using vf::VfSetting;
using vf::VfState;
using Kind = VfSetting::Kind;

/// sriov-cni's configuration, validated as sriov-cni's LoadConf does.
struct SriovConfig : Config {
  std::string device_id;
  std::optional<uint32_t> vlan;
  uint32_t vlan_qos = 0;
  std::optional<uint16_t> vlan_proto;  // set only when vlanProto was given
  std::optional<Mac> mac;
  std::optional<bool> spoofchk;
  std::optional<bool> trust;
  std::optional<LinkState> link_state;
  std::optional<uint32_t> min_tx_rate, max_tx_rate;  // Mbit/s
  std::optional<uint32_t> mtu_bytes;

  /// The PF-side settings to apply to VF `vf`, in sriov-cni's ApplyVFConfig order.
  std::vector<VfSetting> pf_settings(uint32_t vf) const {
    std::vector<VfSetting> out;
    auto add = [&](Kind k) -> VfSetting& {
      out.push_back(VfSetting{});
      out.back().vf = vf;
      out.back().kind = k;
      return out.back();
    };
    if (vlan) {
      VfSetting& s = add(vlan_proto && *vlan_proto == ETH_P_8021AD ? Kind::VlanList : Kind::Vlan);
      s.vlan = *vlan;
      s.qos = vlan_qos;
      s.vlan_proto = vlan_proto.value_or(ETH_P_8021Q);
    }
    if (mac) add(Kind::Mac).mac = *mac;
    if (min_tx_rate || max_tx_rate) {
      VfSetting& s = add(Kind::Rate);
      s.min_tx_rate = min_tx_rate.value_or(0);
      s.max_tx_rate = max_tx_rate.value_or(0);
    }
    if (spoofchk) add(Kind::SpoofChk).on = *spoofchk;
    if (trust) add(Kind::Trust).on = *trust;
    if (link_state) add(Kind::LinkState).link_state = *link_state;
    return out;
  }
};

Result<std::optional<bool>> on_off(const json::Value& conf, const char* key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_string(conf, key, where));
  if (!v) return std::optional<bool>{};
  if (*v == "on") return std::optional<bool>(true);
  if (*v == "off") return std::optional<bool>(false);
  return fail(cni_code::kInvalidConfig, where + "." + key + " \"" + *v + "\" must be \"on\" or \"off\"");
}

Result<std::optional<uint32_t>> rate(const json::Value& conf, const char* key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_int(conf, key, where));
  if (!v) return std::optional<uint32_t>{};
  if (*v < 0 || *v > UINT32_MAX) {
    return fail(cni_code::kInvalidConfig, where + "." + key + " " + std::to_string(*v) + " must be 0 or more Mbit/s");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*v));
}

Result<SriovConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  SriovConfig c;
  const std::string& where = in.network;
  c.device_id = PLUMB_TRY(vf_attach::device_id(conf, in, "sriov"));
  auto vlan = PLUMB_TRY(json::get_int(conf, "vlan", where));
  auto qos = PLUMB_TRY(json::get_int(conf, "vlanQoS", where));
  auto proto = PLUMB_TRY(json::get_string(conf, "vlanProto", where));
  if (vlan && (*vlan < 0 || *vlan > 4094)) {
    return fail(cni_code::kInvalidConfig,
                where + ".vlan " + std::to_string(*vlan) + " is invalid: it must be in the range 0-4094");
  }
  if (qos && (*qos < 0 || *qos > 7)) {
    return fail(cni_code::kInvalidConfig,
                where + ".vlanQoS " + std::to_string(*qos) + " is invalid: it must be in the range 0-7");
  }
  if (qos && *qos != 0 && (!vlan || *vlan == 0)) {
    return fail(cni_code::kInvalidConfig, where + ".vlanQoS " + std::to_string(*qos) + " needs a non-zero vlan");
  }
  if (proto) {
    if (!vlan || *vlan == 0)
      return fail(cni_code::kInvalidConfig, where + ".vlanProto \"" + *proto + "\" needs a non-zero vlan");
    if (strcasecmp(proto->c_str(), "802.1q") == 0) {
      c.vlan_proto = ETH_P_8021Q;
    } else if (strcasecmp(proto->c_str(), "802.1ad") == 0) {
      c.vlan_proto = ETH_P_8021AD;
    } else {
      return fail(cni_code::kInvalidConfig,
                  where + ".vlanProto \"" + *proto + "\" is invalid: it must be \"802.1q\" or \"802.1ad\"");
    }
  }
  if (vlan) c.vlan = static_cast<uint32_t>(*vlan);
  c.vlan_qos = static_cast<uint32_t>(qos.value_or(0));
  // sriov-cni's order: the config's "mac", then CNI_ARGS MAC= (when not empty), then
  // runtimeConfig.mac (the "mac" capability).
  std::optional<std::string> mac = PLUMB_TRY(json::get_string(conf, "mac", where));
  std::string mac_key = where + ".mac";
  for (const auto& [k, v] : in.cni_args) {
    if (k != "MAC" || v.empty()) continue;
    mac = v;
    mac_key = "CNI_ARGS MAC";
  }
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto m = PLUMB_TRY(json::get_string(*rc, "mac", where + ".runtimeConfig", true)); m && !m->empty()) {
      mac = *m;
      mac_key = where + ".runtimeConfig.mac";
    }
  }
  if (mac) {
    auto m = Mac::parse(*mac);
    if (!m) return fail(cni_code::kInvalidConfig, mac_key + " \"" + *mac + "\" is not a valid MAC address");
    c.mac = *m;
  }
  c.spoofchk = PLUMB_TRY(on_off(conf, "spoofchk", where));
  c.trust = PLUMB_TRY(on_off(conf, "trust", where));
  c.link_state = PLUMB_TRY(vf_attach::parse_link_state(conf, where));
  c.min_tx_rate = PLUMB_TRY(rate(conf, "min_tx_rate", where));
  c.max_tx_rate = PLUMB_TRY(rate(conf, "max_tx_rate", where));
  if (c.min_tx_rate && c.max_tx_rate && *c.max_tx_rate != 0 && *c.max_tx_rate < *c.min_tx_rate) {
    return fail(cni_code::kInvalidConfig, where + ".max_tx_rate " + std::to_string(*c.max_tx_rate) +
                                              " is below min_tx_rate " + std::to_string(*c.min_tx_rate) + " (Mbit/s)");
  }
  c.mtu_bytes = PLUMB_TRY(parse_mtu(conf, where));
  return c;
}

/// Whether the PF-side MAC `saved` reports is an administrative one. igb reports a VF's own MAC
/// there once the VF has set it, so a saved MAC equal to the VF netdev's own (`own`, before the
/// ADD; nullopt for a VF without netdev) or all zero is not: the VF had no administrative MAC.
bool admin_mac(const VfState& saved, const std::optional<Mac>& own) {
  return saved.mac && *saved.mac != Mac{} && (!own || *saved.mac != *own);
}

/// The saved values to restore, in sriov-cni's ResetVFConfig order. A MAC that was no
/// administrative one (admin_mac) is restored as 00:00:00:00:00:00, which removes the
/// administrative MAC (igb, ice, i40e) instead of pinning the VF's own MAC on it.
std::vector<VfSetting> restore_list(const std::vector<VfSetting>& applied, const VfState& saved,
                                    const std::optional<Mac>& own) {
  static constexpr Kind kOrder[] = {Kind::Vlan, Kind::SpoofChk, Kind::Mac, Kind::Trust, Kind::Rate, Kind::LinkState};
  std::vector<VfSetting> out;
  for (Kind k : kOrder) {
    for (auto& s : applied) {
      bool same = s.kind == k || (k == Kind::Vlan && s.kind == Kind::VlanList);
      if (!same) continue;
      auto r = vf::restore_of(s, saved);
      if (r && r->kind == Kind::Mac && !admin_mac(saved, own)) r->mac = Mac{};
      if (r) out.push_back(*r);
    }
  }
  return out;
}

/// A VF without a reachable PF (no physfn: a VF passed into a VM) attaches like host-device: the
/// settings only its PF can make are refused, each by its key.
Status refuse_pf_side(const Context& ctx, const SriovConfig& c, const pci::VfDevice& dev) {
  std::vector<std::string> asked;
  if (c.mac && dev.userspace()) asked.emplace_back("mac");  // no netdev to set it on either
  if (c.vlan) asked.emplace_back("vlan");
  if (c.vlan_qos != 0) asked.emplace_back("vlanQoS");
  if (c.vlan_proto) asked.emplace_back("vlanProto");
  if (c.spoofchk) asked.emplace_back("spoofchk");
  if (c.trust) asked.emplace_back("trust");
  if (c.link_state) asked.emplace_back("link_state");
  if (c.min_tx_rate) asked.emplace_back("min_tx_rate");
  if (c.max_tx_rate) asked.emplace_back("max_tx_rate");
  if (asked.empty()) return {};
  std::string keys;
  for (const auto& k : asked) keys += (keys.empty() ? "" : ", ") + ctx.network + "." + k;
  return fail(cni_code::kInvalidConfig, keys + ": VF " + dev.pci +
                                            " has no reachable PF (no physfn in sysfs, e.g. a VF passed into a VM), and " +
                                            (asked.size() == 1 ? "this is a setting" : "these are settings") +
                                            " only the PF can make; without them the VF attaches like host-device");
}

Result<cni::CniResult> sriov_add(Context& ctx, const SriovConfig& c, const cni::CniResult*) {
  vf_attach::DefaultBackends defaults(ctx);
  vf_attach::Backends& b = vf_attach::backends_of(defaults);
  pci::VfDevice dev = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, c.device_id, false, ctx.network + ".deviceID"));
  const bool no_pf = dev.pf_pci.empty();
  if (no_pf) PLUMB_TRY(refuse_pf_side(ctx, c, dev));
  const bool userspace = dev.userspace();
  if (!userspace) {
    if (dev.netdev.empty()) {
      return fail(cni_code::kNotFound, "VF " + dev.pci + " (driver " + (dev.driver.empty() ? "none" : dev.driver) +
                                           ") has no network interface in sysfs");
    }
    PLUMB_TRY(vf_attach::ensure_ifname_free(ctx));
  }
  // Without a PF, a requested MAC is set on the VF netdev only (move_netdev), like host-device would.
  std::vector<VfSetting> apply = no_pf ? std::vector<VfSetting>{} : c.pf_settings(dev.vf_index);
  if (!apply.empty() && dev.pf_netdev.empty()) {
    return fail(cni_code::kNotFound,
                "PF " + dev.pf_pci + " of VF " + dev.pci + " has no network interface to set VF settings through");
  }

  vf_attach::Claim cl = PLUMB_TRY(vf_attach::claim(ctx, b, "sriov", dev, userspace ? "userspace" : "netdev"));
  VfState saved;
  if (!apply.empty()) {
    if (b.pf == nullptr) return fail(cni_code::kInternal, "sriov: no PF backend");
    saved = PLUMB_TRY(b.pf->get_vf(dev.pf_netdev, dev.vf_index));
  }
  std::optional<Mac> own;
  if (!userspace) {
    if (auto l = PLUMB_TRY(link::get(*ctx.node, dev.netdev))) own = l->mac();
  }
  // An administrative MAC restored by DEL governs the VF again once its driver reloads (then
  // rebound), so the netdev's own MAC is not set back over it (the VF would be refused).
  const bool restore_admin = c.mac && !no_pf && admin_mac(saved, own) && !userspace;
  vf_attach::NetdevOrig orig;
  if (!userspace)
    orig = PLUMB_TRY(vf_attach::register_return_netdev(ctx, "sriov", dev.pci, dev.netdev, c.mac && !restore_admin,
                                                       c.mtu_bytes.has_value()));
  if (!apply.empty()) {
    PLUMB_TRY(vf_attach::apply_pf_settings(ctx, b, cl, "sriov", dev.pf_netdev, apply, restore_list(apply, saved, own),
                                           restore_admin ? dev.driver : ""));
  }

  if (userspace) return vf_attach::finish_pci_vf(ctx, c.ipam, dev, nullptr, c.mac ? c.mac->str() : "");
  if (c.mac && !no_pf) PLUMB_TRY(vf_attach::take_pf_mac(ctx, dev, orig, *c.mac));
  link::LinkInfo l = PLUMB_TRY(vf_attach::move_netdev(ctx, orig, c.mac, c.mtu_bytes));
  return vf_attach::finish_pci_vf(ctx, c.ipam, dev, &l, "");
}

Status sriov_check(Context& ctx, const SriovConfig& c, const cni::CniResult&) {
  return vf_attach::check_attachment(ctx, c.device_id);
}

}  // namespace

const Driver kSriov = make_driver<SriovConfig, parse_config, sriov_add, sriov_check>("sriov");

}  // namespace plumb::drivers
