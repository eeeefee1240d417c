// The reference "vrf" plugin (chained), natively: the attachment's interface in the pod is
// enslaved to VRF `vrfname` there (created, up, when missing: on routing table `table`, or the
// lowest table no other VRF of the pod uses). As the reference: the interface's global routes
// (scope universe) are saved before and re-added in the VRF's table after, its global IPv6
// addresses put back when the kernel dropped them; an interface that already has a master, or an
// existing VRF on another table than `table`, fails the ADD. DEL takes the interface out and
// deletes the VRF once nothing is enslaved to it. The previous result passes through.
// Keys: vrfname (required), table. A kernel without VRF (CONFIG_NET_VRF) fails with kKernelFeature.
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/route.hpp"

namespace plumb::drivers {
namespace {

/// The vrf plugin's configuration, validated.
struct VrfConfig : Config {
  std::string vrf;
  uint32_t table = 0;  // 0: the lowest table no VRF of the pod uses
};

Result<VrfConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  VrfConfig c;
  const std::string& where = in.network;
  auto name = PLUMB_TRY(json::get_string(conf, "vrfname", where));
  if (!name || name->empty()) return fail(cni_code::kInvalidConfig, where + ".vrfname is required: the VRF to put the interface in");
  if (!link::valid_ifname(*name)) return fail(cni_code::kInvalidConfig, where + ".vrfname \"" + *name + "\" is not a valid interface name");
  c.vrf = *name;
  if (auto t = PLUMB_TRY(json::get_uint(conf, "table", where))) {
    if (*t > UINT32_MAX) return fail(cni_code::kInvalidConfig, where + ".table " + std::to_string(*t) + " is not a routing table (0..4294967295)");
    c.table = static_cast<uint32_t>(*t);
  }
  return c;
}

/// The lowest table (from 1) no VRF in the pod uses, as the reference's findFreeRoutingTableID.
Result<uint32_t> free_table(netlink::Socket& pod) {
  std::set<uint32_t> taken;
  for (auto& l : PLUMB_TRY(link::list(pod))) {
    if (l.kind == "vrf") taken.insert(l.vrf_table);
  }
  uint32_t t = 1;
  while (taken.count(t) != 0) ++t;
  return t;
}

/// The existing VRF `c.vrf` in the pod, checked (a VRF, on c.table when one is asked); nullopt
/// when there is none.
Result<std::optional<link::LinkInfo>> existing_vrf(Context& ctx, const VrfConfig& c) {
  auto vrf = PLUMB_TRY(link::get(*ctx.pod, c.vrf));
  if (!vrf) return vrf;
  if (vrf->kind != "vrf") return fail(cni_code::kInvalidConfig, ctx.network + ".vrfname \"" + c.vrf + "\" exists in the pod and is not a VRF");
  if (c.table != 0 && vrf->vrf_table != c.table) {
    return fail(cni_code::kConflict, "VRF " + c.vrf + " already exists with a different routing table " + std::to_string(vrf->vrf_table) +
                                         " (" + ctx.network + ".table is " + std::to_string(c.table) + ")");
  }
  return vrf;
}

/// Global (scope universe) routes through `index` in the pod's main table, both families.
Result<std::vector<route::Route>> global_routes(netlink::Socket& pod, int index) {
  std::vector<route::Route> out;
  for (int family : {AF_INET, AF_INET6}) {
    for (auto& r : PLUMB_TRY(route::list(pod, family))) {
      if (r.oif == index && r.scope == RT_SCOPE_UNIVERSE && r.type == RTN_UNICAST) out.push_back(r);
    }
  }
  return out;
}

Result<std::vector<IpPrefix>> global_v6(netlink::Socket& pod, int index) {
  std::vector<IpPrefix> out;
  for (auto& a : PLUMB_TRY(addr::list(pod, index, AF_INET6))) {
    if (a.scope == RT_SCOPE_UNIVERSE) out.push_back(a.prefix);
  }
  return out;
}

/// Puts back global IPv6 addresses the kernel dropped when the interface changed master, and
/// waits (bounded: about 2.5 s) for each one's local route in the VRF's table, as the reference.
Status restore_v6(Context& ctx, const link::LinkInfo& itf, const std::vector<IpPrefix>& before, uint32_t table) {
  auto after = PLUMB_TRY(global_v6(*ctx.pod, itf.index));
  for (auto& p : before) {
    if (std::find(after.begin(), after.end(), p) != after.end()) continue;
    auto st = steps::run(ctx, steps::AddOwnLinkAddress{steps::Ns::kPod, itf.index, p, true});
    if (!st) return std::unexpected(st.error().within("restore " + p.str() + " on " + itf.name));
    bool seen = false;
    for (int attempt = 0; attempt <= 8 && !seen; ++attempt) {
      for (auto& r : PLUMB_TRY(route::list(*ctx.pod, AF_INET6, table))) seen |= r.dst.len == 128 && r.dst.addr == p.addr;
      if (!seen && attempt < 8) std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));
    }
    if (!seen) return fail(cni_code::kKernel, "the local route of " + p.str() + " did not appear in table " + std::to_string(table));
  }
  return {};
}

Result<cni::CniResult> vrf_add(Context& ctx, const VrfConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) return fail(cni_code::kInvalidConfig, ctx.network + ": vrf must be chained: missing prevResult from earlier plugin");
  auto itf = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!itf) return fail(cni_code::kInvalidConfig, ctx.network + ": interface " + ctx.ifname + " not found in " + ctx.netns_path);
  if (itf->master_index != 0) {
    auto master = PLUMB_TRY(link::get(*ctx.pod, itf->master_index));
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " has already a master set: " + (master ? master->name : std::string("?")));
  }
  auto existing = PLUMB_TRY(existing_vrf(ctx, c));  // checked before the first change
  auto v6 = PLUMB_TRY(global_v6(*ctx.pod, itf->index));
  auto routes = PLUMB_TRY(global_routes(*ctx.pod, itf->index));
  steps::JoinPodVrf join{c.vrf, std::nullopt, itf->index, ctx.ifname};
  if (!existing) join.create_table = c.table != 0 ? c.table : PLUMB_TRY(free_table(*ctx.pod));
  auto st = steps::run(ctx, join);
  if (!st && st.error().cni_code == cni_code::kKernelFeature) {
    return fail(cni_code::kKernelFeature, ctx.network + ": this kernel has no VRF support (CONFIG_NET_VRF, module vrf)",
                st.error().text());
  }
  if (!st) return std::unexpected(st.error().within(ctx.network));
  auto vrf = PLUMB_TRY(link::get(*ctx.pod, c.vrf));
  if (!vrf) return fail(cni_code::kKernel, "VRF " + c.vrf + " not found in " + ctx.netns_path + " after joining it");
  PLUMB_TRY(restore_v6(ctx, *itf, v6, vrf->vrf_table));
  for (auto r : routes) {
    r.table = vrf->vrf_table;
    auto added = steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, r, true});
    if (!added) return std::unexpected(added.error().within("move a route of " + ctx.ifname + " to VRF " + c.vrf));
  }
  return *prev;
}

Status vrf_check(Context& ctx, const VrfConfig& c, const cni::CniResult&) {
  auto vrf = PLUMB_TRY(link::get(*ctx.pod, c.vrf));
  if (!vrf || vrf->kind != "vrf") return fail(cni_code::kKernel, "CHECK: VRF " + c.vrf + " not found in " + ctx.netns_path);
  auto itf = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!itf || itf->master_index != vrf->index) {
    return fail(cni_code::kKernel, "CHECK: failed to find " + ctx.ifname + " associated to VRF " + c.vrf);
  }
  return {};
}

}  // namespace

const Driver kVrf = make_driver<VrfConfig, parse_config, vrf_add, vrf_check>("vrf");

namespace undo {

Status run_op(Context& ctx, const VrfRelease& op) {
  if (ctx.pod == nullptr) return {};  // the pod namespace is gone, and the VRF with it
  auto vrf = PLUMB_TRY(link::get(*ctx.pod, op.vrf));
  if (!vrf || vrf->kind != "vrf") return {};
  int members = 0;
  for (auto& l : PLUMB_TRY(link::list(*ctx.pod))) {
    if (l.master_index != vrf->index) continue;
    if (l.name != op.ifname) {
      ++members;
      continue;
    }
    link::LinkChange release;
    release.master_index = 0;
    auto st = link::modify(*ctx.pod, l.index, release);
    if (!st) return std::unexpected(st.error().within("undo: take " + op.ifname + " out of VRF " + op.vrf));
  }
  if (members != 0) return {};  // still used by another attachment
  auto removed = link::remove(*ctx.pod, vrf->index);
  if (!removed) return std::unexpected(removed.error().within("undo: delete VRF " + op.vrf));
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
