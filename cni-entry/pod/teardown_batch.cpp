// DEL with the pod's devices deleted in one RTM_DELLINK (attach.hpp teardown_batched).
#include <algorithm>
#include <variant>

#include "cni-entry/pod/attach.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/link.hpp"

namespace plumb::pod {
namespace {

/// Whether the batch applies: a pod namespace, complete records made in it, and a non-empty
/// link group there holding only the records' interfaces.
Result<bool> batchable(Kernel& k, const std::string& netns_path, const std::vector<state::AttachmentRecord>& records) {
  if (!k.pod || records.empty()) return false;
  for (const auto& rec : records) {
    if (rec.phase != "ready" || rec.netns != netns_path) return false;
  }
  bool any = false;
  for (const auto& l : PLUMB_TRY(link::list(*k.pod))) {
    if (l.group != link::kPodLinkGroup) continue;
    auto named = [&](const state::AttachmentRecord& rec) { return rec.ifname == l.name; };
    if (std::none_of(records.begin(), records.end(), named)) return false;  // not this DEL's to delete
    any = true;
  }
  return any;
}

/// Runs the record's undo operations (newest first, rollback-only ones skipped: complete
/// records) whose kind is (links) or is not (!links) a link deletion.
Status unwind_part(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                   const state::AttachmentRecord& rec, bool links) {
  auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
  if (rec.result.IsObject()) ctx.attachment_result = &rec.result;
  const std::string origin = state.record_path(rec);
  if (!rec.undo.IsArray()) return fail(cni_code::kDecode, origin + ": the undo list is not a list");
  auto st = txn::unwind(rec.undo, /*complete=*/true, [&](const json::Value& v) -> Status {
    auto op = PLUMB_TRY(drivers::undo::decode(v, origin));
    if (std::holds_alternative<drivers::undo::LinkDel>(op) != links) return {};
    return drivers::undo::run(ctx, op);
  });
  if (!st) return std::unexpected(st.error().within("tear down " + rec.ifname + " (" + rec.network + ")"));
  return {};
}

}  // namespace

std::optional<std::vector<Status>> teardown_batched(const cni::Env& env, const PlumbConfig& conf, Kernel& k,
                                                    const state::StateDir& state,
                                                    const std::vector<state::AttachmentRecord>& records) {
  auto ok = batchable(k, env.netns, records);
  if (!ok || !*ok) return std::nullopt;
  std::vector<Status> out(records.size());
  for (size_t i = records.size(); i-- > 0;) out[i] = unwind_part(env, conf, k, state, records[i], /*links=*/false);
  txn::fault_point();
  // A failure here leaves the devices to the link deletions of pass 3, one message each.
  (void)link::remove_group(*k.pod, link::kPodLinkGroup);
  txn::fault_point();
  for (size_t i = records.size(); i-- > 0;) {
    Status st = unwind_part(env, conf, k, state, records[i], /*links=*/true);
    if (out[i] && !st) out[i] = st;
    if (out[i]) out[i] = state.remove(records[i]);
    txn::fault_point();
  }
  return out;
}

}  // namespace plumb::pod
