// The reference "dummy" plugin, natively: a dummy device created in the pod namespace under the
// attachment's name, with the IPAM's addresses and routes (traffic to it goes nowhere: it gives
// the pod addresses that are always up). Keys: ipam (required: "dummy interface requires an IPAM
// configuration", as the reference). A kernel without dummy devices (CONFIG_DUMMY) fails the ADD
// with kKernelFeature naming it.
#include "drivers/registry.hpp"
#include "drivers/steps.hpp"

namespace plumb::drivers {
namespace {

/// The dummy plugin has no keys of its own.
struct DummyConfig : Config {};

Result<DummyConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  const json::Value* ipam = PLUMB_TRY(json::get_object(conf, "ipam", in.network));
  if (ipam == nullptr || json::find(*ipam, "type") == nullptr) {
    return fail(cni_code::kInvalidConfig, in.network + ": dummy interface requires an IPAM configuration");
  }
  return DummyConfig{};
}

Result<cni::CniResult> dummy_add(Context& ctx, const DummyConfig& c, const cni::CniResult*) {
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  auto st = steps::run(ctx, steps::CreatePodLink{ctx.ifname, std::nullopt, /*via_pod=*/true, steps::DummyLink{}});
  if (!st && st.error().cni_code == cni_code::kKernelFeature) {
    return fail(cni_code::kKernelFeature, ctx.network + ": this kernel has no dummy devices (CONFIG_DUMMY, module dummy)",
                st.error().text());
  }
  if (!st) return std::unexpected(st.error().within(ctx.network + ": create dummy " + ctx.ifname + " in " + ctx.netns_path));
  auto pod_link = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!pod_link) return fail(cni_code::kKernel, "dummy " + ctx.ifname + " not found in " + ctx.netns_path + " after creation");

  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, c.ipam));
  apply_config_dns(r, c.dns, /*always=*/true);  // as the reference dummy: the config's "dns" replaces the IPAM's
  if (r.ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + ": IPAM plugin returned missing IP config");
  PLUMB_TRY(finish_pod_interface(ctx, *pod_link, r));
  return r;
}

Status dummy_check(Context& ctx, const DummyConfig&, const cni::CniResult& prev) {
  link::LinkInfo pod_link = PLUMB_TRY(check_pod_interface(ctx, prev, "dummy"));
  PLUMB_TRY(check_pod_routes(ctx, prev));
  return check_pod_addresses(ctx, pod_link.index, prev);
}

}  // namespace

const Driver kDummy = make_driver<DummyConfig, parse_config, dummy_add, dummy_check>("dummy");

}  // namespace plumb::drivers
