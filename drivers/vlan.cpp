// The reference "vlan" plugin, natively: an 802.1Q link with VLAN ID `vlanId` on `master`, born
// directly in the pod namespace under the attachment's name (lower::create_in_pod), addresses
// and routes in the pod.
// Keys: master (required), vlanId (0..4094), mtu (<= the master's), linkInContainer (the master
// lives in the pod namespace), ipam (required: the reference plugin fails without one).
// A kernel without 802.1Q (CONFIG_VLAN_8021Q) fails the ADD with kKernelFeature naming it.
#include "drivers/lower.hpp"
#include "drivers/registry.hpp"

namespace plumb::drivers {
namespace {

/// The vlan plugin's configuration, validated.
struct VlanConfig : Config {
  lower::Keys keys;  // master required
  uint16_t vlan_id = 0;
};

Result<VlanConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  VlanConfig c;
  const std::string& where = in.network;
  c.keys = PLUMB_TRY(lower::parse_keys(conf, where));
  if (c.keys.master.empty()) {
    return fail(cni_code::kInvalidConfig, where + ".master is required: it names the host interface to create the VLAN on");
  }
  if (auto v = PLUMB_TRY(json::get_int(conf, "vlanId", where))) {
    if (*v < 0 || *v > 4094) {
      return fail(cni_code::kInvalidConfig, where + ".vlanId " + std::to_string(*v) + " is not a valid VLAN ID (0..4094)");
    }
    c.vlan_id = static_cast<uint16_t>(*v);
  }
  const json::Value* ipam = PLUMB_TRY(json::get_object(conf, "ipam", where));
  if (ipam == nullptr || json::find(*ipam, "type") == nullptr) {
    return fail(cni_code::kInvalidConfig, where + ": the vlan plugin needs an \"ipam\" (the reference plugin fails without one)");
  }
  return c;
}

Result<cni::CniResult> vlan_add(Context& ctx, const VlanConfig& c, const cni::CniResult*) {
  link::LinkInfo master = PLUMB_TRY(lower::resolve_master(ctx, c.keys, c.keys.master));
  const std::string what = "create vlan " + std::to_string(c.vlan_id) + " on master " + master.name;
  const bool release_registered = ipam_release_ahead(ctx, c.ipam);  // announced with the link
  link::VlanSpec spec{ctx.ifname,
                      master.index,
                      c.vlan_id,
                      c.keys.mtu_bytes.value_or(0),
                      c.keys.link_in_container ? -1 : ctx.pod_ns->fd(),
                      link::kPodLinkGroup};
  auto created = lower::create_in_pod(ctx, what, c.keys, spec);
  if (!created && created.error().cni_code == cni_code::kKernelFeature) {
    return fail(cni_code::kKernelFeature, ctx.network + ": this kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q, module 8021q)",
                created.error().text());
  }
  link::LinkInfo pod_link = PLUMB_TRY(std::move(created));

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam, release_registered));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference vlan: the config's "dns" replaces the IPAM's
  if (r.ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + ": IPAM plugin returned missing IP config");
  PLUMB_TRY(finish_pod_interface(ctx, pod_link, r));
  return r;
}

Status vlan_check(Context& ctx, const VlanConfig& c, const cni::CniResult& prev) {
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "vlan"));
  if (pod_link.vlan_id != c.vlan_id) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has VLAN ID " + std::to_string(pod_link.vlan_id) + ", expected " +
                                       std::to_string(c.vlan_id));
  }
  PLUMB_TRY(lower::resolve_master(ctx, c.keys, c.keys.master));
  PLUMB_TRY(check_pod_routes(ctx, prev));
  return check_pod_addresses(ctx, pod_link.index, prev);
}

}  // namespace

const Driver kVlan = make_driver<VlanConfig, parse_config, vlan_add, vlan_check>("vlan");

}  // namespace plumb::drivers
