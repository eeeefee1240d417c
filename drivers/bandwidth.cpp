// The reference "bandwidth" plugin (chained), natively: limits enforced by plumb's eBPF programs
// on the HOST side of the pod's veth instead of TBF + an IFB device per pod.
//   egressRate/egressBurst   (what the pod sends)     -> tc clsact ingress of the host veth
//   ingressRate/ingressBurst (what the pod receives)  -> tc clsact egress of the host veth
// Rates in bits per second, bursts in bits (the reference plugin's keys and CONVENTIONS.md's
// runtimeConfig "bandwidth" capability). As the reference: the static keys win when present,
// else runtimeConfig.bandwidth (keys matched case-insensitively); a rate needs its burst and a
// burst its rate; burst/8 must stay below 2^32-1 (`burst/8 >= math.MaxUint32` is its error).
// The programs are node-wide and pinned (ebpf/loader.hpp); per pod: clsact + one cls_bpf filter
// per shaped hook + one state map entry per hook, all removed by the "bandwidth.remove" undo op.
// An interface without a host-side veth peer in prevResult (macvlan, ipvlan, host-device, SR-IOV)
// cannot be shaped: the ADD fails (spec 4.1.2.1.8).
#include <cstdint>
#include <limits>
#include <optional>

#include "drivers/registry.hpp"
#include "drivers/undo.hpp"
#include "ebpf/loader.hpp"
#include "engine/kernel/tc.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::drivers {
namespace {

using ebpf::Hook;

/// The plugin's configuration, validated: a limit per shaped direction (pod's point of view).
struct BandwidthConfig : Config {
  std::optional<ebpf::Limit> ingress;  // what the pod receives: host egress hook
  std::optional<ebpf::Limit> egress;   // what the pod sends: host ingress hook
};

constexpr Hook hook_of_pod_ingress = Hook::HostEgress;
constexpr Hook hook_of_pod_egress = Hook::HostIngress;

Result<std::optional<ebpf::Limit>> direction(const json::Value& obj, const std::string& where, const char* rate_key,
                                             const char* burst_key, bool ci) {
  uint64_t rate = PLUMB_TRY(json::get_uint(obj, rate_key, where, ci)).value_or(0);
  uint64_t burst = PLUMB_TRY(json::get_uint(obj, burst_key, where, ci)).value_or(0);
  if (rate != 0 && burst == 0) {
    return fail(cni_code::kInvalidConfig, where + "." + rate_key + " is " + std::to_string(rate) + " but " + burst_key +
                                              " is not set: if rate is set, burst must also be set");
  }
  if (burst != 0 && rate == 0) {
    return fail(cni_code::kInvalidConfig, where + "." + burst_key + " is " + std::to_string(burst) + " but " + rate_key +
                                              " is not set: if burst is set, rate must also be set");
  }
  if (burst / 8 >= std::numeric_limits<uint32_t>::max()) {
    return fail(cni_code::kInvalidConfig, where + "." + burst_key + " " + std::to_string(burst) +
                                              " bits is too large: burst cannot be more than 4GB");
  }
  if (rate == 0) return std::optional<ebpf::Limit>{};
  return std::optional<ebpf::Limit>(ebpf::Limit{rate, burst});
}

Result<BandwidthConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  const std::string& where = in.network;
  for (const char* key : {"shapedSubnets", "unshapedSubnets"}) {
    if (json::find(conf, key) != nullptr) {
      return fail(cni_code::kUnsupportedField, where + "." + key + " is not supported by plumb's bandwidth plugin");
    }
  }
  const json::Value* src = &conf;
  std::string src_where = where;
  bool ci = false;
  bool static_keys = false;
  for (const char* key : {"ingressRate", "ingressBurst", "egressRate", "egressBurst"}) static_keys |= json::find(conf, key) != nullptr;
  if (!static_keys) {
    if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
      if (const json::Value* bw = PLUMB_TRY(json::get_object(*rc, "bandwidth", where + ".runtimeConfig", true))) {
        src = bw;
        src_where = where + ".runtimeConfig.bandwidth";
        ci = true;
      }
    }
  }
  BandwidthConfig c;
  c.ingress = PLUMB_TRY(direction(*src, src_where, "ingressRate", "ingressBurst", ci));
  c.egress = PLUMB_TRY(direction(*src, src_where, "egressRate", "egressBurst", ci));
  return c;
}

/// The pod interface and its host-side veth peer, from prevResult and the kernel.
struct HostSide {
  link::LinkInfo pod;
  link::LinkInfo host;
};

Result<HostSide> host_side(Context& ctx, const cni::CniResult& prev) {
  const std::string what = "bandwidth on " + ctx.ifname + " (network " + ctx.network + ")";
  bool in_prev = false;
  for (auto& i : prev.interfaces) in_prev |= !i.sandbox.empty() && i.name == ctx.ifname;
  if (!in_prev) return fail(cni_code::kInvalidConfig, what + ": prevResult has no interface " + ctx.ifname + " inside the sandbox");
  if (ctx.pod == nullptr) return fail(cni_code::kInvalidEnv, what + ": the pod namespace is not open");
  auto pod = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!pod) return fail(cni_code::kKernel, what + ": interface " + ctx.ifname + " not found in " + ctx.netns_path);
  std::string why;
  std::optional<link::LinkInfo> host;
  if (pod->kind != "veth") {
    why = "it is " + (pod->kind.empty() ? std::string("a device without a veth peer") : "a " + pod->kind + " device");
  } else {
    host = PLUMB_TRY(link::get(*ctx.node, pod->link_index));
    if (!pod->link_netnsid || !host || host->kind != "veth" || host->link_index != pod->index) {
      why = "its veth peer is not in the node namespace";
    } else {
      bool listed = false;
      for (auto& i : prev.interfaces) listed |= i.sandbox.empty() && i.name == host->name;
      if (!listed) why = "its veth peer " + host->name + " is not a host interface of prevResult";
    }
  }
  if (!why.empty()) {
    return fail(cni_code::kInvalidConfig, what + ": the interface has no host side to shape (" + why +
                                              "); macvlan, ipvlan, host-device and SR-IOV attachments cannot be shaped, so the "
                                              "attachment fails as spec 4.1.2.1.8 requires");
  }
  return HostSide{*pod, *host};
}

undo::BandwidthRemove remove_op(const std::string& bpffs_dir, const link::LinkInfo& host, uint64_t owner, const BandwidthConfig& c,
                                bool clsact, bool fq) {
  undo::BandwidthRemove op;
  op.bpffs_dir = bpffs_dir;
  op.host = host.name;
  op.ifindex = host.index;
  op.owner = owner;
  if (c.egress) op.hooks.emplace_back(ebpf::hook_name(hook_of_pod_egress));
  if (c.ingress) op.hooks.emplace_back(ebpf::hook_name(hook_of_pod_ingress));
  op.clsact = clsact;
  op.fq = fq;
  return op;
}

Result<cni::CniResult> bandwidth_add(Context& ctx, const BandwidthConfig& c, const cni::CniResult* prev) {
  if (!c.ingress && !c.egress) return prev ? *prev : cni::CniResult{};  // nothing to shape: pass through
  if (prev == nullptr) {
    return fail(cni_code::kInvalidConfig, "network " + ctx.network +
                                              ": bandwidth must be chained after the plugin that creates the interface (no prevResult)");
  }
  HostSide hs = PLUMB_TRY(host_side(ctx, *prev));
  const int idx = hs.host.index;
  auto progs = PLUMB_TRY(ebpf::Programs::load_or_open(ctx.bpffs_dir));
  uint64_t owner = PLUMB_TRY(ebpf::random_owner());

  std::string ingress_qdisc = PLUMB_TRY(tc::ingress_qdisc(*ctx.node, idx));
  if (!ingress_qdisc.empty() && ingress_qdisc != "clsact") {
    return fail(cni_code::kConflict, "bandwidth on " + ctx.ifname + ": host interface " + hs.host.name + " has an \"" + ingress_qdisc +
                                         "\" qdisc, which excludes the clsact qdisc the programs attach to");
  }
  bool create_clsact = ingress_qdisc.empty();
  bool use_fq = progs.mode() == ebpf::Mode::EdtFq && c.ingress.has_value();
  PLUMB_TRY(undo::will(ctx, remove_op(ctx.bpffs_dir, hs.host, owner, c, create_clsact, use_fq)));

  if (create_clsact) {
    auto st = tc::add_clsact(*ctx.node, idx);
    if (!st && st.error().sys_errno != EEXIST) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname));
  }
  // Map entries first: a program that finds no entry lets everything through.
  auto shape = [&](Hook h, const ebpf::Limit& limit) -> Status {
    PLUMB_TRY(progs.configure(idx, h, limit, owner));
    auto st = tc::attach(*ctx.node, idx, ebpf::clsact_hook(h), progs.prog_fd(h), progs.prog_name(h));
    if (!st) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname + " (host side " + hs.host.name + ")"));
    return {};
  };
  if (c.egress) PLUMB_TRY(shape(hook_of_pod_egress, *c.egress));
  if (c.ingress) PLUMB_TRY(shape(hook_of_pod_ingress, *c.ingress));
  if (use_fq) {
    auto st = tc::set_root_fq(*ctx.node, idx);
    if (!st) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname + " (EDT mode)"));
  }
  return *prev;
}

Status bandwidth_check(Context& ctx, const BandwidthConfig& c, const cni::CniResult& prev) {
  if (!c.ingress && !c.egress) return {};
  HostSide hs = PLUMB_TRY(host_side(ctx, prev));
  auto progs = PLUMB_TRY(ebpf::Programs::open_existing(ctx.bpffs_dir));
  if (!progs) return fail(cni_code::kKernel, "CHECK: bandwidth programs are not loaded under " + ctx.bpffs_dir);
  for (Hook h : {Hook::HostIngress, Hook::HostEgress}) {
    const std::optional<ebpf::Limit>& want = h == hook_of_pod_egress ? c.egress : c.ingress;
    const std::string where = "CHECK: bandwidth " + std::string(ebpf::hook_name(h)) + " of " + hs.host.name;
    auto filters = PLUMB_TRY(tc::filters(*ctx.node, hs.host.index, ebpf::clsact_hook(h)));
    const tc::FilterInfo* ours = nullptr;
    for (auto& f : filters) {
      if (f.prio == tc::kFilterPrio && f.handle == tc::kFilterHandle) ours = &f;
    }
    if (!want) {
      if (ours != nullptr) return fail(cni_code::kKernel, where + ": a plumb filter is attached but no limit is configured");
      continue;
    }
    uint32_t id = PLUMB_TRY(progs->prog_id(h));
    if (ours == nullptr || ours->kind != "bpf" || !ours->direct_action || ours->bpf_prog_id != id) {
      return fail(cni_code::kKernel, where + ": plumb's bpf filter (program id " + std::to_string(id) + ") is not attached");
    }
    auto entry = PLUMB_TRY(progs->read(hs.host.index, h));
    if (!entry) return fail(cni_code::kKernel, where + ": no state map entry");
    if (entry->rate_bps != want->rate_bps || entry->burst_bits != want->burst_bits) {
      return fail(cni_code::kKernel, where + ": enforces " + std::to_string(entry->rate_bps) + " bit/s, burst " +
                                         std::to_string(entry->burst_bits) + " bits; expected " + std::to_string(want->rate_bps) +
                                         " bit/s, burst " + std::to_string(want->burst_bits) + " bits");
    }
  }
  if (progs->mode() == ebpf::Mode::EdtFq && c.ingress) {
    std::string root = PLUMB_TRY(tc::root_qdisc(*ctx.node, hs.host.index));
    if (root != "fq") return fail(cni_code::kKernel, "CHECK: bandwidth (EDT mode) needs fq as root qdisc of " + hs.host.name + ", found \"" + root + "\"");
  }
  return {};
}

}  // namespace

const Driver kBandwidth = make_driver<BandwidthConfig, parse_config, bandwidth_add, bandwidth_check>("bandwidth");

namespace undo {

/// "bandwidth.remove": detach plumb's filters (only if the interface at the recorded index still
/// has the recorded name), restore the qdiscs plumb added, delete the map entries this
/// attachment owns. Idempotent: every missing piece is success.
Status run_op(Context& ctx, const BandwidthRemove& op) {
  using ebpf::Hook;
  const std::string& host = op.host;
  std::vector<Hook> hooks;
  for (auto& h : op.hooks) {
    if (h == ebpf::hook_name(Hook::HostIngress)) hooks.push_back(Hook::HostIngress);
    else if (h == ebpf::hook_name(Hook::HostEgress)) hooks.push_back(Hook::HostEgress);
    else return fail(cni_code::kDecode, "undo bandwidth.remove: unknown hook \"" + h + "\"");
  }
  const int idx = op.ifindex;
  std::optional<Error> first;
  auto note = [&](const Status& st) {
    if (!st && !first) first = st.error().within("undo bandwidth on " + host);
  };

  if (ctx.node != nullptr) {
    auto link = link::get(*ctx.node, idx);
    if (!link) {
      note(std::unexpected(link.error()));
    } else if (*link && (*link)->name == host) {
      for (Hook h : hooks) {
        auto r = tc::detach(*ctx.node, idx, ebpf::clsact_hook(h));
        if (!r) note(std::unexpected(r.error()));
      }
      if (op.fq) {
        auto r = tc::del_root(*ctx.node, idx);
        if (!r) note(std::unexpected(r.error()));
      }
      if (op.clsact) {
        auto in = tc::filters(*ctx.node, idx, ebpf::clsact_hook(Hook::HostIngress));
        auto out = tc::filters(*ctx.node, idx, ebpf::clsact_hook(Hook::HostEgress));
        if (!in) note(std::unexpected(in.error()));
        if (!out) note(std::unexpected(out.error()));
        if (in && out && in->empty() && out->empty()) {
          auto r = tc::del_clsact(*ctx.node, idx);
          if (!r) note(std::unexpected(r.error()));
        }
      }
    }
  }
  auto progs = ebpf::Programs::open_existing(op.bpffs_dir);
  if (!progs) {
    note(std::unexpected(progs.error()));
  } else if (*progs) {
    for (Hook h : hooks) {
      auto r = (*progs)->remove(idx, h, op.owner);
      if (!r) note(std::unexpected(r.error()));
    }
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
