// ib-sriov-cni, natively. Keys: deviceID (or runtimeConfig.deviceID), guid through
// runtimeConfig.infinibandGUID (the selection annotation's "infiniband-guid") or args.cni.guid,
// link_state (auto/enable/disable), rdmaIsolation, ibKubernetesEnabled, vfioPciMode, ipam.
//
// ADD: VF from sysfs; with ibKubernetesEnabled, args.cni["mellanox.infiniband.app"] must be
// "configured" and a GUID given; with rdmaIsolation the RDMA subsystem must be in exclusive netns
// mode. The VF is claimed; with a GUID, the previous one is saved (the PF's IFLA_VF_IB_*_GUID when
// it reports them, else the last 8 bytes of the VF netdev's 20-byte IPoIB address) and the new
// node GUID and port GUID are set in two messages on the PF, then the VF is rebound so it takes
// effect; link_state likewise. With rdmaIsolation the VF's RDMA device (sysfs infiniband/) moves
// into the pod over RDMA netlink before the netdev (moving an RDMA device recreates its IPoIB
// netdevs in the source namespace). The netdev then moves like an SR-IOV VF; IPAM.
// vfioPciMode: the VF must be bound to vfio-pci; no netdev, no RDMA move; GUID and IPAM only.
// DEL: netdev back, RDMA device back, previous GUIDs and link state restored and the VF rebound,
// VF released.
#include "drivers/registry.hpp"
#include "drivers/sriov_vf.hpp"
#include "drivers/undo.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/netns.hpp"

namespace plumb::drivers {
namespace sriov {
namespace {

using Kind = VfSetting::Kind;

struct IbConfig : Config {
  std::string device_id;
  std::optional<uint64_t> guid;
  std::optional<LinkState> link_state;
  bool rdma_isolation = false;
  bool ib_kubernetes = false;
  bool vfio_pci_mode = false;
};

Result<IbConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  IbConfig c;
  const std::string& where = in.network;
  c.device_id = PLUMB_TRY(device_id(conf, in, "ib-sriov"));
  c.rdma_isolation = PLUMB_TRY(json::get_bool(conf, "rdmaIsolation", where)).value_or(false);
  c.ib_kubernetes = PLUMB_TRY(json::get_bool(conf, "ibKubernetesEnabled", where)).value_or(false);
  c.vfio_pci_mode = PLUMB_TRY(json::get_bool(conf, "vfioPciMode", where)).value_or(false);
  if (auto ls = PLUMB_TRY(json::get_string(conf, "link_state", where))) {
    if (*ls == "auto") c.link_state = LinkState::Auto;
    else if (*ls == "enable") c.link_state = LinkState::Enable;
    else if (*ls == "disable") c.link_state = LinkState::Disable;
    else return fail(cni_code::kInvalidConfig, where + ".link_state \"" + *ls + "\" must be \"auto\", \"enable\" or \"disable\"");
  }
  // GUID, lowest to highest priority: args.cni.guid, runtimeConfig.infinibandGUID.
  std::optional<std::string> guid;
  std::optional<std::string> ib_status;
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
  if (guid && !guid->empty()) c.guid = PLUMB_TRY(parse_guid(*guid, where + " " + guid_key));
  if (c.ib_kubernetes) {
    if (ib_status.value_or("") != "configured") {
      return fail(cni_code::kInvalidConfig, where + ": ibKubernetesEnabled is set but args.cni[\"mellanox.infiniband.app\"] is \"" +
                                                ib_status.value_or("") + "\", not \"configured\" (check ib-kubernetes)");
    }
    if (!c.guid) return fail(cni_code::kInvalidConfig, where + ": ibKubernetesEnabled is set but no GUID was provided by ib-kubernetes");
  }
  if (c.vfio_pci_mode && c.rdma_isolation) {
    return fail(cni_code::kInvalidConfig, where + ": rdmaIsolation cannot be used with vfioPciMode (a vfio-pci VF has no RDMA device)");
  }
  return c;
}

Result<cni::CniResult> add(Context& ctx, const IbConfig& c, const cni::CniResult*) {
  DefaultBackends defaults(ctx);
  Backends& b = backends_of(ctx, defaults);
  VfDevice dev = PLUMB_TRY(lookup_device(ctx.sysfs_root, c.device_id, true, ctx.network + ".deviceID"));
  if (c.vfio_pci_mode) {
    if (dev.driver != "vfio-pci") {
      return fail(cni_code::kInvalidConfig, ctx.network + ": vfioPciMode is set but VF " + dev.pci + " is bound to " +
                                                (dev.driver.empty() ? std::string("no driver") : dev.driver) + ", not vfio-pci");
    }
  } else {
    if (dev.userspace()) {
      return fail(cni_code::kInvalidConfig, ctx.network + ": VF " + dev.pci + " is bound to " + dev.driver + ": set vfioPciMode");
    }
    if (dev.netdev.empty()) return fail(cni_code::kNotFound, "VF " + dev.pci + " has no IPoIB network interface in sysfs");
    PLUMB_TRY(ensure_ifname_free(ctx));
  }
  if (c.rdma_isolation) {
    if (b.rdma == nullptr) return fail(cni_code::kInternal, "ib-sriov: no RDMA backend");
    PLUMB_TRY(rdma::ensure_exclusive(*b.rdma));
    if (dev.rdma_device.empty()) {
      return fail(cni_code::kNotFound, ctx.network + ": rdmaIsolation is set but VF " + dev.pci + " has no RDMA device (sysfs infiniband/)");
    }
  }

  Claim cl = PLUMB_TRY(claim(ctx, b, "ib-sriov", dev, c.vfio_pci_mode ? "userspace" : "netdev"));

  std::vector<VfSetting> apply, restore;
  if (c.guid || c.link_state) {
    if (dev.pf_netdev.empty()) return fail(cni_code::kNotFound, "PF " + dev.pf_pci + " of VF " + dev.pci + " has no network interface");
    if (b.pf == nullptr) return fail(cni_code::kInternal, "ib-sriov: no PF backend");
    VfState saved = PLUMB_TRY(b.pf->get_vf(dev.pf_netdev, dev.vf_index));
    VfSetting s;
    s.vf = dev.vf_index;
    if (c.guid) {
      // The previous GUID: the PF's report, else the IPoIB address of the VF netdev.
      std::optional<uint64_t> prev = saved.port_guid;
      if (!prev && !dev.netdev.empty()) {
        auto l = PLUMB_TRY(link::get(*ctx.node, dev.netdev));
        if (!l) return fail(cni_code::kNotFound, "IPoIB interface " + dev.netdev + " of VF " + dev.pci + " is not in the node namespace");
        prev = PLUMB_TRY(guid_from_ipoib_hwaddr(l->hwaddr, dev.netdev));
      }
      if (!prev) return fail(cni_code::kKernelFeature, "PF " + dev.pf_netdev + " does not report the GUID of VF " + dev.pci + ": cannot save it");
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
    std::string rebind = c.guid && !c.vfio_pci_mode ? dev.driver : "";
    PLUMB_TRY(apply_pf_settings(ctx, b, cl, "ib-sriov", dev.pf_netdev, apply, restore, rebind));
    if (!rebind.empty()) {
      PLUMB_TRY(rebind_vf(ctx.sysfs_root, dev.pci, rebind));
      dev = PLUMB_TRY(lookup_device(ctx.sysfs_root, c.device_id, true, ctx.network + ".deviceID"));  // names may change
      if (dev.netdev.empty()) return fail(cni_code::kNotFound, "VF " + dev.pci + " has no IPoIB interface after the rebind");
    }
  }

  if (c.rdma_isolation) {
    undo::RdmaReturn op;
    static_cast<undo::VfOwner&>(op) = {"ib-sriov", dev.pci, ctx.container_id, ctx.ifname};
    op.device = dev.rdma_device;
    PLUMB_TRY(undo::will(ctx, std::move(op)));
    auto node_ns = PLUMB_TRY(netns::Netns::current());
    auto st = b.rdma->move(dev.rdma_device, node_ns.fd(), ctx.pod_ns->fd());
    if (!st) return std::unexpected(st.error().within("rdmaIsolation: move RDMA device " + dev.rdma_device + " into " + ctx.netns_path));
  }

  if (c.vfio_pci_mode) return finish_pci_vf(ctx, c.ipam, dev, nullptr, "");
  NetdevOrig orig = PLUMB_TRY(register_return_netdev(ctx, "ib-sriov", dev.pci, dev.netdev, false, false));
  link::LinkInfo l = PLUMB_TRY(move_netdev(ctx, orig, std::nullopt, std::nullopt));
  return finish_pci_vf(ctx, c.ipam, dev, &l, "");
}

Status check(Context& ctx, const IbConfig& c, const cni::CniResult&) { return check_attachment(ctx, c.device_id); }

}  // namespace
}  // namespace sriov

const Driver kIbSriov = make_driver<sriov::IbConfig, sriov::parse_config, sriov::add, sriov::check>("ib-sriov");

}  // namespace plumb::drivers
