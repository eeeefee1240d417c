// DEL with the pod's devices deleted in one RTM_DELLINK (attach.hpp teardown_batched).
#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "cni-entry/pod/attach.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::pod {
namespace {

/// The records' interfaces the group deletion removes: name -> IFLA_INFO_KIND ("veth", ...).
using GroupLinks = std::map<std::string, std::string>;

/// Whether the batch applies: a pod namespace, complete records made in it, and a non-empty
/// link group there holding only the records' interfaces; then those interfaces, else nullopt.
Result<std::optional<GroupLinks>> batchable(Kernel& k, const std::string& netns_path,
                                            const std::vector<state::AttachmentRecord>& records) {
  if (!k.pod || records.empty()) return std::nullopt;
  for (const auto& rec : records) {
    if (rec.phase != "ready" || rec.netns != netns_path) return std::nullopt;
    if (!drivers::undo::check(rec.undo, rec.origin)) return std::nullopt;  // a newer plumb's operation: kept, record by record
  }
  GroupLinks grouped;
  for (const auto& l : PLUMB_TRY(link::list(*k.pod))) {
    if (l.group != link::kPodLinkGroup) continue;
    auto named = [&](const state::AttachmentRecord& rec) { return rec.ifname == l.name; };
    if (std::none_of(records.begin(), records.end(), named)) return std::nullopt;  // not this DEL's to delete
    grouped.emplace(l.name, l.kind);
  }
  if (grouped.empty()) return std::nullopt;
  return grouped;
}

/// The devices a successful group deletion removed, by namespace: the pod interfaces of the
/// group, and the node ends of the veths among them (the kernel deletes a veth pair together;
/// a complete record's node link deletion is the node end of its own pod veth, CreatePodVeth).
struct Gone {
  std::set<std::string> pod;
  std::set<std::string> node;
};

Gone gone_with_group(const GroupLinks& grouped, const std::vector<state::AttachmentRecord>& records) {
  Gone gone;
  for (const auto& [name, kind] : grouped) gone.pod.insert(name);
  for (const auto& rec : records) {
    auto it = grouped.find(rec.ifname);
    if (it == grouped.end() || it->second != "veth") continue;
    (void)txn::unwind(rec.undo, /*complete=*/true, [&](const json::Value& v) -> Status {
      auto op = drivers::undo::decode(v, {});
      auto* del = op ? std::get_if<drivers::undo::LinkDel>(&*op) : nullptr;
      if (del != nullptr && del->where == "node") gone.node.insert(del->name);
      return {};
    });
  }
  return gone;
}

/// When an undo operation of a batched DEL runs: before the group deletion, or after it.
enum class Pass { kBefore, kAfter };

/// Whether the complete record deletes a device it made (a link deletion that is not
/// rollback-only): the group deletion then removes it, and the host end of a veth with it.
bool deletes_its_device(const state::AttachmentRecord& rec) {
  bool found = false;
  (void)txn::unwind(rec.undo, /*complete=*/true, [&](const json::Value& v) -> Status {
    auto op = drivers::undo::decode(v, {});
    found = found || (op && std::holds_alternative<drivers::undo::LinkDel>(*op));
    return {};
  });
  return found;
}

/// The pass of `op`: link deletions after the group deletion (by then they find nothing, or
/// delete what the group did not hold); so is the bandwidth teardown of a record whose device
/// the group deletion removes (the shaped device is that device or its veth peer: its filters
/// and qdiscs go with it, and the operation, finding no device, only deletes its map entries —
/// one link lookup instead of a dozen tc messages). Everything else before.
Pass pass_of(const drivers::undo::Op& op, bool device_goes_with_group) {
  if (std::holds_alternative<drivers::undo::LinkDel>(op)) return Pass::kAfter;
  if (device_goes_with_group && std::holds_alternative<drivers::undo::BandwidthRemove>(op)) return Pass::kAfter;
  return Pass::kBefore;
}

/// Runs `op` of a batched DEL's second pass. A link deletion of a device the group deletion
/// removed (`gone`) needs no request; a bandwidth teardown of such a device only deletes its map
/// entries (run without the device's namespace socket: no filters or qdiscs left to look for).
Status run_after(drivers::Context& ctx, const drivers::undo::Op& op, const Gone& gone) {
  using drivers::undo::BandwidthRemove;
  using drivers::undo::LinkDel;
  if (const auto* del = std::get_if<LinkDel>(&op)) {
    if ((del->where == "pod" ? gone.pod : gone.node).contains(del->name)) return {};
  } else if (const auto* bw = std::get_if<BandwidthRemove>(&op)) {
    const bool pod_side = bw->pod.value_or(false);
    if ((pod_side ? gone.pod : gone.node).contains(bw->host)) {
      netlink::Socket*& nl = pod_side ? ctx.pod : ctx.node;
      netlink::Socket* kept = std::exchange(nl, nullptr);
      Status st = drivers::undo::run(ctx, op);
      nl = kept;
      return st;
    }
  }
  return drivers::undo::run(ctx, op);
}

/// Runs the record's undo operations of pass `pass` (newest first, rollback-only ones skipped:
/// complete records); `goes_with_group` is deletes_its_device(rec); `gone` what the group
/// deletion removed (pass kAfter).
Status unwind_part(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                   state::AttachmentRecord& rec, bool goes_with_group, Pass pass, const Gone& gone) {
  auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
  txn::Journal journal(state, rec);
  if (recordable(state, rec)) ctx.journal = &journal;
  if (rec.result.IsObject()) ctx.attachment_result = &rec.result;
  const std::string origin = state.record_path(rec);
  if (!rec.undo.IsArray()) return fail(cni_code::kDecode, origin + ": the undo list is not a list");
  auto st = txn::unwind(rec.undo, /*complete=*/true, [&](const json::Value& v) -> Status {
    auto op = PLUMB_TRY(drivers::undo::decode(v, origin));
    if (pass_of(op, goes_with_group) != pass) return {};
    return pass == Pass::kAfter ? run_after(ctx, op, gone) : drivers::undo::run(ctx, op);
  });
  if (!st) return std::unexpected(st.error().within("tear down " + rec.ifname + " (" + rec.network + ")"));
  return {};
}

}  // namespace

std::optional<std::vector<Status>> teardown_batched(const cni::Env& env, const PlumbConfig& conf, Kernel& k,
                                                    const state::StateDir& state,
                                                    std::vector<state::AttachmentRecord>& records) {
  auto grouped = batchable(k, env.netns, records);
  if (!grouped || !*grouped) return std::nullopt;
  std::vector<Status> out(records.size());
  std::vector<bool> goes_with_group(records.size());
  for (size_t i = 0; i < records.size(); ++i) goes_with_group[i] = deletes_its_device(records[i]);
  for (size_t i = records.size(); i-- > 0;) {
    out[i] = unwind_part(env, conf, k, state, records[i], goes_with_group[i], Pass::kBefore, Gone{});
  }
  txn::fault_point();
  // A failure here leaves the devices to the link deletions of pass 3, one message each.
  auto removed = link::remove_group(*k.pod, link::kPodLinkGroup);
  const Gone gone = removed && *removed ? gone_with_group(**grouped, records) : Gone{};
  txn::fault_point();
  for (size_t i = records.size(); i-- > 0;) {
    Status st = unwind_part(env, conf, k, state, records[i], goes_with_group[i], Pass::kAfter, gone);
    if (out[i] && !st) out[i] = st;
    if (out[i]) out[i] = state.remove(records[i]);
    txn::fault_point();
  }
  return out;
}

}  // namespace plumb::pod
