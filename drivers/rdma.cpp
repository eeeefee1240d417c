// rdma-cni, natively: the chained plugin that gives the pod the RDMA device of the attachment's
// netdev (RDMA network-namespace isolation, kernel 5.3+). Keys: deviceID (a VF's PCI address or an
// auxiliary device such as "mlx5_core.sf.4"; Multus injects it from kubelet's allocation, as plumb
// does for NADs with k8s.v1.cni.cncf.io/resourceName), args.cni.debug (accepted; plumb's logLevel
// governs logging).
//
// ADD (chained only: a prevResult is required): the RDMA subsystem must be in exclusive netns mode
// (`rdma system set netns exclusive`); the device is deviceID, else the pciID of prevResult's pod
// interface (CNI 1.1.0; plumb's sriov fills it), else, as rdma-cni does, the VF whose administrative
// MAC (PF side, RTM_GETLINK) is that interface's MAC; its RDMA device (sysfs infiniband/, exactly
// one) moves into the pod over RDMA netlink. The result is prevResult unchanged.
// DEL: the RDMA device returns to the node (a pod namespace that is gone returned it already).
// CHECK: nothing (as rdma-cni). The RDMA netlink messages are engine/kernel/rdma.hpp's.
#include "engine/kernel/rdma.hpp"

#include "drivers/registry.hpp"
#include "drivers/vf_attach.hpp"
#include "engine/kernel/pci.hpp"

namespace plumb::drivers {
namespace {

/// rdma-cni's configuration.
struct RdmaConfig : Config {
  std::string device_id;  ///< "" = from prevResult
};

Result<RdmaConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  RdmaConfig c;
  const std::string& where = in.network;
  c.device_id = PLUMB_TRY(json::get_string(conf, "deviceID", where)).value_or("");
  if (!c.device_id.empty() && !pci::valid_pci_address(c.device_id) &&
      (c.device_id.find('/') != std::string::npos || c.device_id.front() == '.')) {
    return fail(cni_code::kInvalidConfig, where + ".deviceID \"" + c.device_id +
                                              "\" is neither a PCI address nor an auxiliary device name");
  }
  if (const json::Value* args = PLUMB_TRY(json::get_object(conf, "args", where))) {
    if (const json::Value* cni = PLUMB_TRY(json::get_object(*args, "cni", where + ".args"))) {
      (void)PLUMB_TRY(json::get_bool(*cni, "debug", where + ".args.cni"));
    }
  }
  return c;
}

/// The pod interface of prevResult (rdma-cni: the result must have exactly one interface).
Result<const cni::Interface*> pod_interface(const Context& ctx, const cni::CniResult& prev) {
  const cni::Interface* found = nullptr;
  int n = 0;
  for (const auto& i : prev.interfaces) {
    if (i.sandbox.empty()) continue;
    found = &i;
    ++n;
  }
  if (n != 1) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": rdma has no deviceID and prevResult has " + std::to_string(n) +
                                              " pod interfaces, not one, to find the device from");
  }
  return found;
}

/// The VF whose PF-side administrative MAC is `mac` (rdma-cni's GetVfPciDevFromMAC).
Result<std::string> vf_by_admin_mac(Context& ctx, vf_attach::Backends& b, const std::string& mac) {
  auto want = Mac::parse(mac);
  if (!want) return fail(cni_code::kInvalidConfig, ctx.network + ": prevResult's interface MAC \"" + mac + "\" is not a MAC");
  std::vector<std::string> matches;
  for (const auto& v : PLUMB_TRY(pci::list_vfs(ctx.sysfs_root))) {
    if (v.pf_netdev.empty() || b.pf == nullptr) continue;
    auto st = b.pf->get_vf(v.pf_netdev, v.vf_index);
    if (st && st->mac && *st->mac == *want) matches.push_back(v.vf_pci);
  }
  if (matches.size() != 1) {
    return fail(cni_code::kNotFound, ctx.network + ": rdma has no deviceID and " + std::to_string(matches.size()) +
                                         " VFs have administrative MAC " + want->str() + " (one is needed)");
  }
  return matches.front();
}

/// deviceID, else prevResult's pod interface: its pciID, else its MAC's VF.
Result<std::string> device_of(Context& ctx, const RdmaConfig& c, vf_attach::Backends& b, const cni::CniResult& prev) {
  if (!c.device_id.empty()) return c.device_id;
  const cni::Interface* i = PLUMB_TRY(pod_interface(ctx, prev));
  if (!i->pci_id.empty()) return i->pci_id;
  return vf_by_admin_mac(ctx, b, i->mac);
}

Result<cni::CniResult> rdma_add(Context& ctx, const RdmaConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": rdma is a chained plugin: it must follow the plugin that "
                                                        "creates the interface (sriov, ib-sriov) in the plugin list");
  }
  if (ctx.pod_ns == nullptr) return fail(cni_code::kInvalidEnv, "rdma: no pod network namespace");
  vf_attach::DefaultBackends defaults(ctx);
  vf_attach::Backends& b = vf_attach::backends_of(defaults);
  if (b.rdma == nullptr) return fail(cni_code::kInternal, "rdma: no RDMA backend");
  auto mode = rdma::ensure_exclusive(*b.rdma, "the rdma plugin");
  if (!mode) return std::unexpected(mode.error().within(ctx.network));
  const std::string device = PLUMB_TRY(device_of(ctx, c, b, *prev));
  auto devs = PLUMB_TRY(pci::rdma_devices(ctx.sysfs_root, device));
  if (devs.size() != 1) {
    return fail(cni_code::kNotFound, ctx.network + ": device " + device + " has " + std::to_string(devs.size()) +
                                         " RDMA devices in sysfs (infiniband/), rdma needs exactly one");
  }
  auto st = vf_attach::move_rdma(ctx, b, "rdma", device, devs.front());
  if (!st)
    return std::unexpected(st.error().within(ctx.network + ": move RDMA device " + devs.front() + " of " + device +
                                             " into " + ctx.netns_path));
  return *prev;
}

Status rdma_check(Context&, const RdmaConfig&, const cni::CniResult&) { return {}; }

}  // namespace

const Driver kRdma = make_driver<RdmaConfig, parse_config, rdma_add, rdma_check>("rdma");

}  // namespace plumb::drivers
