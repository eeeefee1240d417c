// The reference "loopback" plugin: brings lo up in the pod namespace.
#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::drivers {
namespace {

/// loopback has no keys of its own.
struct LoopbackConfig : Config {};

Result<LoopbackConfig> parse_config(const json::Value&, const ParseInput&) { return LoopbackConfig{}; }

Result<cni::CniResult> loopback_add(Context& ctx, const LoopbackConfig&, const cni::CniResult* prev) {
  auto lo = PLUMB_TRY(link::get(*ctx.pod, "lo"));
  if (!lo) return fail(cni_code::kKernel, "no loopback device in " + ctx.netns_path);
  link::LinkChange up;
  up.up = true;
  PLUMB_TRY(steps::run(ctx, steps::SetUpPodLink{lo->index, up}));  // nothing recorded: lo dies with the pod namespace
  // Chained after another plugin, loopback passes the previous result through (as the reference).
  if (prev != nullptr) return *prev;
  cni::CniResult r;
  r.interfaces.push_back({"lo", "00:00:00:00:00:00", std::nullopt, ctx.netns_path, {}, {}});
  r.ips.push_back({PLUMB_TRY(IpPrefix::parse("127.0.0.1/8")), std::nullopt, 0});
  r.ips.push_back({PLUMB_TRY(IpPrefix::parse("::1/128")), std::nullopt, 0});
  return r;
}

Status loopback_check(Context& ctx, const LoopbackConfig&, const cni::CniResult&) {
  auto lo = PLUMB_TRY(link::get(*ctx.pod, "lo"));
  if (!lo || !lo->up()) return fail(cni_code::kKernel, "loopback is not up in " + ctx.netns_path);
  return {};
}

}  // namespace

const Driver kLoopback = make_driver<LoopbackConfig, parse_config, loopback_add, loopback_check>("loopback");

}  // namespace plumb::drivers
