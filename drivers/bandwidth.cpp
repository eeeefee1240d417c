// The reference "bandwidth" plugin (chained), natively: limits enforced by plumb's eBPF programs
// instead of TBF + an IFB device per pod, on the HOST side of the pod's veth when it has one:
//   egressRate/egressBurst   (what the pod sends)     -> tc clsact ingress of the host veth
//   ingressRate/ingressBurst (what the pod receives)  -> tc clsact egress of the host veth
// and otherwise (macvlan, ipvlan, host-device, SR-IOV VF netdevs: no host-side peer; the
// reference cannot shape these, containernetworking/plugins #413, #656) on the POD-side interface
// inside the pod namespace, with the same programs:
//   egressRate/egressBurst   -> tc clsact egress of the pod interface
//   ingressRate/ingressBurst -> tc clsact ingress of the pod interface
// Pod-side filters carry a node-unique 16-bit id as tc classid, the key of their state map
// entries (ifindexes repeat across pod namespaces; ebpf/bandwidth_abi.h).
// Rates in bits per second, bursts in bits (the reference plugin's keys and CONVENTIONS.md's
// runtimeConfig "bandwidth" capability). As the reference: the static keys win when present,
// else runtimeConfig.bandwidth (keys matched case-insensitively); a rate needs its burst and a
// burst its rate; burst/8 must stay below 2^32-1 (`burst/8 >= math.MaxUint32` is its error).
// The programs are node-wide and pinned (ebpf/loader.hpp); per pod: clsact + one cls_bpf filter
// per shaped hook + one state map entry per hook, all removed by the "bandwidth.remove" undo op.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "ebpf/loader.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/tc.hpp"

namespace plumb::drivers {
namespace {

using ebpf::Hook;

/// The plugin's configuration, validated: a limit per shaped direction (pod's point of view).
struct BandwidthConfig : Config {
  std::optional<ebpf::Limit> ingress;  // what the pod receives: host egress hook
  std::optional<ebpf::Limit> egress;   // what the pod sends: host ingress hook
  std::string bpffs_dir;               // where the shaping programs are pinned (DriverSettings::bpffs_dir)
};

/// The clsact hook (named as ebpf::Hook) that shapes the pod's egress / ingress on each side.
Hook hook_of_pod_egress(bool pod_side) { return pod_side ? Hook::HostEgress : Hook::HostIngress; }
Hook hook_of_pod_ingress(bool pod_side) { return pod_side ? Hook::HostIngress : Hook::HostEgress; }
/// The limit enforced at hook `h`.
const std::optional<ebpf::Limit>& limit_at(const BandwidthConfig& c, Hook h, bool pod_side) {
  return h == hook_of_pod_egress(pod_side) ? c.egress : c.ingress;
}

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
  c.bpffs_dir = in.settings.bpffs_dir;
  return c;
}

/// The device that is shaped: the host-side veth peer of the pod interface, or (no such peer) the
/// pod interface itself.
struct Shaped {
  link::LinkInfo dev;
  bool pod_side = false;
  bool fresh = false;  ///< the host veth this chain created: no qdisc on it yet (no query needed)
};

Result<Shaped> shaped_device(Context& ctx, const cni::CniResult& prev) {
  const std::string what = "bandwidth on " + ctx.ifname + " (network " + ctx.network + ")";
  bool in_prev = false;
  for (auto& i : prev.interfaces) in_prev |= !i.sandbox.empty() && i.name == ctx.ifname;
  if (!in_prev) return fail(cni_code::kInvalidConfig, what + ": prevResult has no interface " + ctx.ifname + " inside the sandbox");
  if (ctx.pod == nullptr) return fail(cni_code::kInvalidEnv, what + ": the pod namespace is not open");
  auto listed = [&](const link::LinkInfo& host) {
    return std::any_of(prev.interfaces.begin(), prev.interfaces.end(),
                       [&](const cni::Interface& i) { return i.sandbox.empty() && i.name == host.name; });
  };
  // ADD of a chain whose bridge or ptp made the pair: both ends as made, nothing read back.
  if (ctx.executor != nullptr) {
    auto& made_veths = ctx.executor->made_veths();
    if (auto made = made_veths.find(ctx.ifname); made != made_veths.end() && listed(made->second.host)) {
      const bool fresh = made->second.qdiscs_untouched;
      made->second.qdiscs_untouched = false;
      return Shaped{made->second.host, false, fresh};
    }
  }
  auto pod = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!pod) return fail(cni_code::kKernel, what + ": interface " + ctx.ifname + " not found in " + ctx.netns_path);
  if (pod->kind == "veth" && pod->link_netnsid) {
    auto host = PLUMB_TRY(link::get(*ctx.node, pod->link_index));
    if (host && host->kind == "veth" && host->link_index == pod->index && listed(*host)) return Shaped{*host, false};
  }
  return Shaped{*pod, true};  // no host-side peer in the node: shape inside the pod
}

/// Whether the shaped device has the clsact qdisc (false: no ingress-side qdisc at all).
/// Errors: kConflict when another ingress-side qdisc ("ingress") excludes clsact.
Result<bool> has_clsact(netlink::Socket& nl, const Context& ctx, const Shaped& sd) {
  std::string kind = PLUMB_TRY(tc::ingress_qdisc(nl, sd.dev.index));
  if (!kind.empty() && kind != "clsact") {
    return fail(cni_code::kConflict, "bandwidth on " + ctx.ifname + ": interface " + sd.dev.name + " has an \"" + kind +
                                         "\" qdisc, which excludes the clsact qdisc the programs attach to");
  }
  return !kind.empty();
}

undo::BandwidthRemove remove_op(const std::string& bpffs_dir, const ebpf::Programs& progs, const Shaped& sd, uint64_t owner,
                                const BandwidthConfig& c, bool clsact, bool fq, uint16_t classid) {
  undo::BandwidthRemove op;
  op.bpffs_dir = bpffs_dir;
  op.pins = progs.pin_dir();
  op.host = sd.dev.name;
  op.ifindex = sd.dev.index;
  op.owner = owner;
  if (c.egress) op.hooks.emplace_back(ebpf::hook_name(hook_of_pod_egress(sd.pod_side)));
  if (c.ingress) op.hooks.emplace_back(ebpf::hook_name(hook_of_pod_ingress(sd.pod_side)));
  op.clsact = clsact;
  op.fq = fq;
  if (sd.pod_side) {
    op.pod = true;
    op.classid = classid;
  }
  op.abi = PLUMB_BW_ABI_VERSION;
  return op;
}

/// A random pod-side id, 1..65535.
Result<uint16_t> random_classid() {
  uint64_t r = PLUMB_TRY(ebpf::random_owner());
  return static_cast<uint16_t>(1 + r % 65535);
}

/// Writes the map entries (pod side: under an id no other attachment holds, claimed with
/// BPF_NOEXIST; a taken id is given up and another drawn), their removal recorded first. Returns
/// the id (0 on the host side).
Result<uint16_t> configure_entries(Context& ctx, const ebpf::Programs& progs, const Shaped& sd, const BandwidthConfig& c,
                                   uint64_t owner, bool clsact, bool fq) {
  for (int attempt = 0;; ++attempt) {
    uint16_t id = sd.pod_side ? PLUMB_TRY(random_classid()) : 0;
    steps::WriteBandwidthEntries write{
        &progs, {}, owner, sd.pod_side, remove_op(c.bpffs_dir, progs, sd, owner, c, clsact, fq, id)};
    for (Hook h : {Hook::HostIngress, Hook::HostEgress}) {
      const auto& limit = limit_at(c, h, sd.pod_side);
      if (limit)
        write.entries.emplace_back(sd.pod_side ? ebpf::pod_key(id, h) : ebpf::host_key(sd.dev.index, h), *limit);
    }
    auto st = steps::run(ctx, write);
    if (st) return id;
    if (st.error().cni_code != cni_code::kConflict || attempt >= 8) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname));
  }
}

Result<cni::CniResult> bandwidth_add(Context& ctx, const BandwidthConfig& c, const cni::CniResult* prev) {
  if (!c.ingress && !c.egress) return prev ? *prev : cni::CniResult{};  // nothing to shape: pass through
  if (prev == nullptr) {
    return fail(cni_code::kInvalidConfig, "network " + ctx.network +
                                              ": bandwidth must be chained after the plugin that creates the interface (no prevResult)");
  }
  Shaped sd = PLUMB_TRY(shaped_device(ctx, *prev));
  netlink::Socket& nl = sd.pod_side ? *ctx.pod : *ctx.node;
  const steps::Ns ns = sd.pod_side ? steps::Ns::kPod : steps::Ns::kNode;
  const int idx = sd.dev.index;
  auto progs = PLUMB_TRY(ebpf::Programs::load_or_open(c.bpffs_dir));
  uint64_t owner = PLUMB_TRY(ebpf::random_owner());

  const bool create_clsact = sd.fresh || !PLUMB_TRY(has_clsact(nl, ctx, sd));
  bool use_fq = progs.mode() == ebpf::Mode::EdtFq && limit_at(c, Hook::HostEgress, sd.pod_side).has_value();
  // Map entries first: a program that finds no entry lets everything through.
  uint16_t id = PLUMB_TRY(configure_entries(ctx, progs, sd, c, owner, create_clsact, use_fq));
  if (create_clsact) {
    auto st = steps::run(ctx, steps::AddClsact{ns, idx});
    if (!st && st.error().sys_errno != EEXIST) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname));
    if (!st) (void)PLUMB_TRY(has_clsact(nl, ctx, sd));  // added meanwhile: a clsact is as good as ours
  }
  for (Hook h : {Hook::HostIngress, Hook::HostEgress}) {
    if (!limit_at(c, h, sd.pod_side)) continue;
    auto st = steps::run(
        ctx, steps::AttachShapingFilter{ns, idx, ebpf::clsact_hook(h), progs.prog_fd(h), progs.prog_name(h), id});
    if (!st) {
      return std::unexpected(st.error().within("bandwidth on " + ctx.ifname + " (" + (sd.pod_side ? "pod side " : "host side ") +
                                               sd.dev.name + ")"));
    }
  }
  if (use_fq) {
    auto st = steps::run(ctx, steps::SetRootFq{ns, idx});
    if (!st) return std::unexpected(st.error().within("bandwidth on " + ctx.ifname + " (EDT mode)"));
  }
  return *prev;
}

Status bandwidth_check(Context& ctx, const BandwidthConfig& c, const cni::CniResult& prev) {
  if (!c.ingress && !c.egress) return {};
  Shaped sd = PLUMB_TRY(shaped_device(ctx, prev));
  netlink::Socket& nl = sd.pod_side ? *ctx.pod : *ctx.node;
  auto progs = PLUMB_TRY(ebpf::Programs::open_existing(c.bpffs_dir));
  if (!progs) return fail(cni_code::kKernel, "CHECK: bandwidth programs are not loaded under " + c.bpffs_dir);
  for (Hook h : {Hook::HostIngress, Hook::HostEgress}) {
    const std::optional<ebpf::Limit>& want = limit_at(c, h, sd.pod_side);
    const std::string where = "CHECK: bandwidth " + std::string(tc::hook_name(ebpf::clsact_hook(h))) + " hook of " + sd.dev.name;
    auto filters = PLUMB_TRY(tc::filters(nl, sd.dev.index, ebpf::clsact_hook(h)));
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
    if (sd.pod_side && (ours->classid == 0 || ours->classid > 0xffff)) {
      return fail(cni_code::kKernel, where + ": plumb's filter has no pod-side id (classid)");
    }
    plumb_bw_key key = sd.pod_side ? ebpf::pod_key(static_cast<uint16_t>(ours->classid), h) : ebpf::host_key(sd.dev.index, h);
    auto entry = PLUMB_TRY(progs->read(key));
    if (!entry) return fail(cni_code::kKernel, where + ": no state map entry");
    if (entry->rate_bps != want->rate_bps || entry->burst_bits != want->burst_bits) {
      return fail(cni_code::kKernel, where + ": enforces " + std::to_string(entry->rate_bps) + " bit/s, burst " +
                                         std::to_string(entry->burst_bits) + " bits; expected " + std::to_string(want->rate_bps) +
                                         " bit/s, burst " + std::to_string(want->burst_bits) + " bits");
    }
  }
  if (progs->mode() == ebpf::Mode::EdtFq && limit_at(c, Hook::HostEgress, sd.pod_side)) {
    std::string root = PLUMB_TRY(tc::root_qdisc(nl, sd.dev.index));
    if (root != "fq") return fail(cni_code::kKernel, "CHECK: bandwidth (EDT mode) needs fq as root qdisc of " + sd.dev.name + ", found \"" + root + "\"");
  }
  return {};
}

}  // namespace

const Driver kBandwidth = make_driver<BandwidthConfig, parse_config, bandwidth_add, bandwidth_check>("bandwidth");

namespace undo {

/// Detaches plumb's filters from the shaped device (only if the interface at the recorded index
/// still has the recorded name), restores the qdiscs plumb added.
void detach_filters(netlink::Socket& nl, const BandwidthRemove& op, const std::vector<ebpf::Hook>& hooks,
                    const std::function<void(const Status&)>& note) {
  using ebpf::Hook;
  const int idx = op.ifindex;
  auto link = link::get(nl, idx);
  if (!link) return note(std::unexpected(link.error()));
  if (!*link || (*link)->name != op.host) return;
  for (Hook h : hooks) {
    auto r = tc::detach(nl, idx, ebpf::clsact_hook(h));
    if (!r) note(std::unexpected(r.error()));
  }
  if (op.fq) {
    auto r = tc::del_root(nl, idx);
    if (!r) note(std::unexpected(r.error()));
  }
  if (op.clsact) {
    auto in = tc::filters(nl, idx, ebpf::clsact_hook(Hook::HostIngress));
    auto out = tc::filters(nl, idx, ebpf::clsact_hook(Hook::HostEgress));
    if (!in) note(std::unexpected(in.error()));
    if (!out) note(std::unexpected(out.error()));
    if (in && out && in->empty() && out->empty()) {
      auto r = tc::del_clsact(nl, idx);
      if (!r) note(std::unexpected(r.error()));
    }
  }
}

/// The pin directories that may hold the entries of `op`: the recorded one; else the one of the
/// recorded ABI; else (a record written before ABI 2) ABI 1's, and ABI 2's, which the plumb
/// that started recording "abi" wrote to (the owner id makes trying both safe).
std::vector<std::string> entry_dirs(const BandwidthRemove& op) {
  if (op.pins) return {*op.pins};
  std::vector<uint32_t> abis = op.abi ? std::vector<uint32_t>{*op.abi} : std::vector<uint32_t>{1, 2};
  std::vector<std::string> out;
  out.reserve(abis.size());
  for (uint32_t abi : abis) out.push_back(op.bpffs_dir + "/" + ebpf::pin_name(abi));
  return out;
}

/// "bandwidth.remove": plumb's filters detached, the qdiscs plumb added restored, the map entries
/// this attachment owns deleted where they were written (entry_dirs: an earlier ABI's pins too,
/// which go once no entry is left in them). Idempotent: every missing piece is success; a
/// pod-side device whose namespace is gone took its filters with it.
Status run_op(Context& ctx, const BandwidthRemove& op) {
  using ebpf::Hook;
  std::vector<Hook> hooks;
  hooks.reserve(op.hooks.size());
  for (auto& h : op.hooks) {
    if (h == ebpf::hook_name(Hook::HostIngress)) hooks.push_back(Hook::HostIngress);
    else if (h == ebpf::hook_name(Hook::HostEgress)) hooks.push_back(Hook::HostEgress);
    else return fail(cni_code::kDecode, "undo bandwidth.remove: unknown hook \"" + h + "\"");
  }
  const bool pod_side = op.pod.value_or(false);
  if (pod_side && (!op.classid || *op.classid == 0 || *op.classid > 0xffff)) {
    return fail(cni_code::kDecode, "undo bandwidth.remove: a pod-side record without a classid");
  }
  std::optional<Error> first;
  auto note = [&](const Status& st) {
    if (!st && !first) first = st.error().within("undo bandwidth on " + op.host);
  };
  netlink::Socket* nl = pod_side ? ctx.pod : ctx.node;
  if (nl != nullptr) detach_filters(*nl, op, hooks, note);
  std::vector<plumb_bw_key> keys;
  keys.reserve(hooks.size());
  for (Hook h : hooks) keys.push_back(pod_side ? ebpf::pod_key(static_cast<uint16_t>(*op.classid), h) : ebpf::host_key(op.ifindex, h));
  for (const std::string& dir : entry_dirs(op)) {
    auto removed = ebpf::remove_entries(dir, keys, op.owner);
    note(removed);
    const std::string bpffs = dir.substr(0, dir.find_last_of('/'));
    // Housekeeping, never this DEL's failure: the next DEL or first load of an ABI retries it.
    if (removed && dir != bpffs + "/" + ebpf::pin_name()) (void)ebpf::prune_unused_pins(bpffs);
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
