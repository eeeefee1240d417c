// ib-sriov-cni, natively. Keys: deviceID (or runtimeConfig.deviceID), guid through
// runtimeConfig.infinibandGUID (the selection annotation's "infiniband-guid") or args.cni.guid,
// link_state (auto/enable/disable), rdmaIsolation, ibKubernetesEnabled, vfioPciMode, pkey (a string,
// accepted and kept in the recorded config as ib-sriov-cni keeps it: ib-kubernetes reads it from the
// NAD and programs the subnet manager; the plugin itself never uses it), ipam.
//
// ADD: VF from sysfs; with ibKubernetesEnabled, args.cni["mellanox.infiniband.app"] must be
// "configured" and a GUID given; with rdmaIsolation the RDMA subsystem must be in exclusive netns
// mode. The VF is claimed; with a GUID, the previous one is saved (the PF's IFLA_VF_IB_*_GUID when
// it reports them, else the last 8 bytes of the VF netdev's 20-byte IPoIB address) and the new
// node GUID and port GUID are set in two messages on the PF, then the VF is rebound so it takes
// effect; link_state likewise. With rdmaIsolation the VF's RDMA device (sysfs infiniband/) moves
// into the pod over RDMA netlink before the netdev (moving an RDMA device recreates its IPoIB
// netdevs in the source namespace). The netdev then moves like an SR-IOV VF; IPAM.
// vfioPciMode: the VF must be bound to vfio-pci; no netdev, no RDMA move; GUID and IPAM only. As in
// ib-sriov-cni, a device bound to vfio-pci is in this mode even without the key, and a PF (no
// physfn) is passed through only in it (PF passthrough: claimed, no VF settings).
// DEL: netdev back, RDMA device back, previous GUIDs and link state restored and the VF rebound,
// VF released. The VF steps shared with sriov and vdpa are drivers/vf_attach.hpp's.
#include "drivers/registry.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/rdma.hpp"
#include "engine/kernel/vf.hpp"

namespace plumb::drivers {
namespace {

using vf::LinkState;
using vf::VfSetting;
using vf::VfState;
using Kind = VfSetting::Kind;

/// ib-sriov-cni's configuration, validated.
struct IbConfig : Config {
  std::string device_id;
  std::optional<uint64_t> guid;  ///< node and port GUID to set (first text byte most significant)
  std::optional<LinkState> link_state;
  bool rdma_isolation = false;
  bool ib_kubernetes = false;
  bool vfio_pci_mode = false;
  std::optional<std::string> pkey;  ///< "pkey": carried for ib-kubernetes (it reads it from the NAD); not programmed here
};

/// The GUID to set, lowest to highest priority: args.cni.guid, runtimeConfig.infinibandGUID; and
/// args.cni["mellanox.infiniband.app"] (ib-kubernetes' status) into `ib_status`.
Result<std::optional<uint64_t>> parse_guid_keys(const json::Value& conf, const std::string& where,
                                                std::optional<std::string>& ib_status) {
  std::optional<std::string> guid;
  if (const json::Value* args = PLUMB_TRY(json::get_object(conf, "args", where))) {
    if (const json::Value* cni = PLUMB_TRY(json::get_object(*args, "cni", where + ".args"))) {
      guid = PLUMB_TRY(json::get_string(*cni, "guid", where + ".args.cni"));
      ib_status = PLUMB_TRY(json::get_string(*cni, "mellanox.infiniband.app", where + ".args.cni"));
    }
  }
  std::string guid_key = "args.cni.guid";
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto g = PLUMB_TRY(json::get_string(*rc, "infinibandGUID", where + ".runtimeConfig", true)); g && !g->empty()) {
      guid = *g;
      guid_key = "runtimeConfig.infinibandGUID";
    }
  }
  if (!guid || guid->empty()) return std::optional<uint64_t>{};
  return std::optional<uint64_t>(PLUMB_TRY(vf::parse_guid(*guid, where + " " + guid_key)));
}

Result<IbConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  IbConfig c;
  const std::string& where = in.network;
  c.device_id = PLUMB_TRY(vf_attach::device_id(conf, in, "ib-sriov"));
  c.rdma_isolation = PLUMB_TRY(json::get_bool(conf, "rdmaIsolation", where)).value_or(false);
  c.ib_kubernetes = PLUMB_TRY(json::get_bool(conf, "ibKubernetesEnabled", where)).value_or(false);
  c.vfio_pci_mode = PLUMB_TRY(json::get_bool(conf, "vfioPciMode", where)).value_or(false);
  c.pkey = PLUMB_TRY(json::get_string(conf, "pkey", where));
  c.link_state = PLUMB_TRY(vf_attach::parse_link_state(conf, where));
  std::optional<std::string> ib_status;
  c.guid = PLUMB_TRY(parse_guid_keys(conf, where, ib_status));
  if (c.ib_kubernetes) {
    if (ib_status.value_or("") != "configured") {
      return fail(cni_code::kInvalidConfig,
                  where + ": ibKubernetesEnabled is set but args.cni[\"mellanox.infiniband.app\"] is \"" +
                      ib_status.value_or("") + "\", not \"configured\" (check ib-kubernetes)");
    }
    if (!c.guid)
      return fail(cni_code::kInvalidConfig,
                  where + ": ibKubernetesEnabled is set but no GUID was provided by ib-kubernetes");
  }
  if (c.vfio_pci_mode && c.rdma_isolation) {
    return fail(cni_code::kInvalidConfig,
                where + ": rdmaIsolation cannot be used with vfioPciMode (a vfio-pci VF has no RDMA device)");
  }
  return c;
}

/// Checks the VF against the mode the config asks for (vfio-pci bound, or a kernel VF with an
/// IPoIB netdev and ctx.ifname free in the pod) and, with rdmaIsolation, that the RDMA subsystem
/// is in exclusive mode and the VF has an RDMA device. Nothing is changed.
Status check_vf(Context& ctx, const IbConfig& c, vf_attach::Backends& b, const pci::VfDevice& dev) {
  if (c.vfio_pci_mode) {
    if (dev.driver != "vfio-pci") {
      return fail(cni_code::kInvalidConfig, ctx.network + ": vfioPciMode is set but VF " + dev.pci + " is bound to " +
                                                (dev.driver.empty() ? std::string("no driver") : dev.driver) +
                                                ", not vfio-pci");
    }
  } else {
    if (dev.userspace()) {
      return fail(cni_code::kInvalidConfig,
                  ctx.network + ": VF " + dev.pci + " is bound to " + dev.driver + ": set vfioPciMode");
    }
    if (dev.netdev.empty())
      return fail(cni_code::kNotFound, "VF " + dev.pci + " has no IPoIB network interface in sysfs");
    PLUMB_TRY(vf_attach::ensure_ifname_free(ctx));
  }
  if (c.rdma_isolation) {
    if (b.rdma == nullptr) return fail(cni_code::kInternal, "ib-sriov: no RDMA backend");
    PLUMB_TRY(rdma::ensure_exclusive(*b.rdma, "rdmaIsolation"));
    if (dev.rdma_device.empty()) {
      return fail(cni_code::kNotFound,
                  ctx.network + ": rdmaIsolation is set but VF " + dev.pci + " has no RDMA device (sysfs infiniband/)");
    }
  }
  return {};
}

/// The settings to apply and those restoring `saved`, in order: node GUID, port GUID (the previous
/// GUID: the PF's report, else the last 8 bytes of the VF netdev's IPoIB address), link state
/// (restored to auto when the PF does not report it, as ib-sriov-cni does).
Status guid_and_state_settings(Context& ctx, const IbConfig& c, const pci::VfDevice& dev, const VfState& saved,
                               std::vector<VfSetting>& apply, std::vector<VfSetting>& restore) {
  VfSetting s;
  s.vf = dev.vf_index;
  if (c.guid) {
    std::optional<uint64_t> prev = saved.port_guid;
    if (!prev && !dev.netdev.empty()) {
      auto l = PLUMB_TRY(link::get(*ctx.node, dev.netdev));
      if (!l)
        return fail(cni_code::kNotFound,
                    "IPoIB interface " + dev.netdev + " of VF " + dev.pci + " is not in the node namespace");
      prev = PLUMB_TRY(vf::guid_from_ipoib_hwaddr(l->hwaddr, dev.netdev));
    }
    if (!prev)
      return fail(cni_code::kKernelFeature,
                  "PF " + dev.pf_netdev + " does not report the GUID of VF " + dev.pci + ": cannot save it");
    s.kind = Kind::NodeGuid;
    s.guid = *c.guid;
    apply.push_back(s);
    s.kind = Kind::PortGuid;
    apply.push_back(s);
    VfSetting r = s;
    r.kind = Kind::NodeGuid;
    r.guid = saved.node_guid.value_or(*prev);
    restore.push_back(r);
    r.kind = Kind::PortGuid;
    r.guid = *prev;
    restore.push_back(r);
  }
  if (c.link_state) {
    s.kind = Kind::LinkState;
    s.link_state = *c.link_state;
    apply.push_back(s);
    VfSetting r = s;
    r.link_state = saved.link_state.value_or(LinkState::Auto);  // ib-sriov-cni resets to auto
    restore.push_back(r);
  }
  return {};
}

/// Saves and sets the GUIDs and link state through the PF, then rebinds a kernel VF whose GUID
/// changed (so it takes effect) and reads it again from sysfs (its names may change).
Status set_pf_side(Context& ctx, const IbConfig& c, vf_attach::Backends& b, vf_attach::Claim& cl, pci::VfDevice& dev) {
  if (dev.pf_netdev.empty())
    return fail(cni_code::kNotFound, "PF " + dev.pf_pci + " of VF " + dev.pci + " has no network interface");
  if (b.pf == nullptr) return fail(cni_code::kInternal, "ib-sriov: no PF backend");
  VfState saved = PLUMB_TRY(b.pf->get_vf(dev.pf_netdev, dev.vf_index));
  std::vector<VfSetting> apply, restore;
  PLUMB_TRY(guid_and_state_settings(ctx, c, dev, saved, apply, restore));
  std::string rebind = c.guid && !c.vfio_pci_mode ? dev.driver : "";
  PLUMB_TRY(vf_attach::apply_pf_settings(ctx, b, cl, "ib-sriov", dev.pf_netdev, apply, restore, rebind,
                                         /*rebind_now=*/!rebind.empty()));
  if (rebind.empty()) return {};
  dev = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, c.device_id, true, ctx.network + ".deviceID"));
  if (dev.netdev.empty())
    return fail(cni_code::kNotFound, "VF " + dev.pci + " has no IPoIB interface after the rebind");
  return {};
}

/// The config with vfioPciMode as ib-sriov-cni takes it: a device bound to vfio-pci is in VFIO mode
/// even when the key is not set; a PF (no physfn) passes through only in VFIO mode.
Result<IbConfig> effective(const Context& ctx, const IbConfig& conf, const pci::VfDevice& dev) {
  IbConfig c = conf;
  if (dev.driver == "vfio-pci") c.vfio_pci_mode = true;
  if (c.vfio_pci_mode && c.rdma_isolation) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": rdmaIsolation cannot be used with " + dev.pci +
                                              ", which is bound to vfio-pci (a vfio-pci device has no RDMA device)");
  }
  if (dev.pf_pci.empty() && !c.vfio_pci_mode) {
    return fail(cni_code::kInvalidConfig, ctx.network + ".deviceID: " + dev.pci +
                                              " is a PF (no physfn link); ib-sriov passes a PF through only bound to "
                                              "vfio-pci (vfioPciMode), as ib-sriov-cni does");
  }
  return c;
}

Result<cni::CniResult> ib_sriov_add(Context& ctx, const IbConfig& conf, const cni::CniResult*) {
  vf_attach::DefaultBackends defaults(ctx);
  vf_attach::Backends& b = vf_attach::backends_of(defaults);
  pci::VfDevice dev = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, conf.device_id, false, ctx.network + ".deviceID"));
  const IbConfig c = PLUMB_TRY(effective(ctx, conf, dev));
  const bool pf_passthrough = dev.pf_pci.empty();
  PLUMB_TRY(check_vf(ctx, c, b, dev));
  vf_attach::Claim cl = PLUMB_TRY(vf_attach::claim(ctx, b, "ib-sriov", dev, c.vfio_pci_mode ? "userspace" : "netdev"));
  // A passed-through PF gets no VF settings (ib-sriov-cni skips them; its GUID is its own).
  if (!pf_passthrough && (c.guid || c.link_state)) PLUMB_TRY(set_pf_side(ctx, c, b, cl, dev));
  // Before the netdev: moving an RDMA device recreates its IPoIB netdevs in the source namespace.
  if (c.rdma_isolation) {
    auto st = vf_attach::move_rdma(ctx, b, "ib-sriov", dev.pci, dev.rdma_device);
    if (!st)
      return std::unexpected(
          st.error().within("rdmaIsolation: move RDMA device " + dev.rdma_device + " into " + ctx.netns_path));
  }
  if (c.vfio_pci_mode) return vf_attach::finish_pci_vf(ctx, c.ipam, dev, nullptr, "");
  vf_attach::NetdevOrig orig =
      PLUMB_TRY(vf_attach::register_return_netdev(ctx, "ib-sriov", dev.pci, dev.netdev, false, false));
  link::LinkInfo l = PLUMB_TRY(vf_attach::move_netdev(ctx, orig, std::nullopt, std::nullopt));
  return vf_attach::finish_pci_vf(ctx, c.ipam, dev, &l, "");
}

Status ib_sriov_check(Context& ctx, const IbConfig& c, const cni::CniResult&) {
  return vf_attach::check_attachment(ctx, c.device_id);
}

}  // namespace

const Driver kIbSriov = make_driver<IbConfig, parse_config, ib_sriov_add, ib_sriov_check>("ib-sriov");

}  // namespace plumb::drivers
