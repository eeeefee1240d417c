// Hot-plug (hotplug.hpp): a running sandbox's attachments follow its pod's selection annotation.
#include "cni-entry/pod/hotplug.hpp"

#include <unistd.h>

#include <algorithm>
#include <optional>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "engine/state/journal.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod::hotplug {
namespace {

/// The key of the pod's running sandbox: a key whose default record names the pod and is ready;
/// of several (an old sandbox whose DEL has not come yet), the one whose netns still exists.
Result<std::optional<state::Key>> sandbox_of(const state::StateDir& state, const source::PodRef& pod) {
  std::optional<state::Key> found;
  for (const auto& key : PLUMB_TRY(state.keys())) {
    auto recs = state.read(key);
    if (!recs || recs->records.empty()) continue;
    const auto& head = recs->records.front();
    if (!head.is_default || head.phase != "ready" || head.pod_namespace != pod.namespace_ || head.pod_name != pod.name)
      continue;
    if (!found || ::access(head.netns.c_str(), F_OK) == 0) found = key;
  }
  return found;
}

/// The environment of a verb for the sandbox, as the runtime gave its ADD (what the records keep).
cni::Env sandbox_env(const state::Key& key, const state::AttachmentRecord& head) {
  cni::Env env;
  env.command = cni::Command::Add;
  env.container_id = key.container_id;
  env.ifname = key.ifname;
  env.netns = head.netns;
  env.args = {{"K8S_POD_NAMESPACE", head.pod_namespace},
              {"K8S_POD_NAME", head.pod_name},
              {"K8S_POD_INFRA_CONTAINER_ID", key.container_id}};
  for (const auto& [k, v] : env.args) env.args_raw += (env.args_raw.empty() ? "" : ";") + k + "=" + v;
  return env;
}

bool same(const state::AttachmentRecord& r, const Attachment& a) {
  return r.selection == a.selection && r.ifname == a.ifname && r.network == a.net.name;
}

/// Attaches one planned attachment as record `index` of the key; rolled back when it fails.
Status attach_one(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                  const state::AttachmentRecord& head, Attachment& att, int index) {
  state::AttachmentRecord rec;
  rec.container_id = env.container_id;
  rec.cni_ifname = env.ifname;
  rec.index = index;
  rec.ifname = att.ifname;
  rec.network = att.net.name;
  rec.selection = att.selection;
  rec.pod_namespace = head.pod_namespace;
  rec.pod_name = head.pod_name;
  rec.netns = env.netns;
  if (att.claim) rec.ipam_owner = att.claim->owner;
  rec.disable_check = att.net.disable_check;
  rec.disable_gc = att.net.disable_gc;
  rec.config.CopyFrom(att.plugins, rec.config.GetAllocator());
  txn::Journal journal(state, rec);
  Status st = [&]() -> Status {
    const cni::CniResult result = PLUMB_TRY(run_chain(env, conf, k, att, journal));
    auto encoded = PLUMB_TRY(cni::encode_result(result, kInternalVersion));
    rec.result.CopyFrom(encoded, rec.result.GetAllocator());
    auto entry = nad::status_from_result(att.status_name, result, att.ifname, false);
    if (!att.device_info.file.empty()) {
      if (auto di = PLUMB_TRY(devinfo::read(att.device_info.file))) entry.device_info = std::move(*di);
    }
    std::vector<nad::StatusEntry> entries;
    entries.push_back(std::move(entry));
    auto status = PLUMB_TRY(json::parse(nad::encode_network_status(entries), "network-status", state::kRecordMaxDepth));
    rec.status.CopyFrom(status[0], rec.status.GetAllocator());
    rec.phase = "ready";
    return state.write(rec);
  }();
  if (!st) {
    auto undone = teardown(env, conf, k, state, rec, /*complete=*/false);
    if (!undone) return std::unexpected(st.error().within(undone.error().text() + " (kept for DEL) after"));
  }
  return st;
}

/// The annotation value from every ready record of the key, in index order.
std::string status_of(const state::Records& recs) {
  json::Document list(rapidjson::kArrayType);
  for (const auto& r : recs.records) {
    if (r.phase == "ready" && r.status.IsObject())
      list.PushBack(json::Value(r.status, list.GetAllocator()), list.GetAllocator());
  }
  return json::dump(list);
}

/// Under the key's lock: rolls back what a killed hot-plug left, detaches, attaches. Returns the
/// network-status to publish.
Result<std::string> change_locked(const PlumbConfig& conf, const state::StateDir& state, const state::Key& key,
                                  PodPlan& planned, Outcome& out) {
  auto recs = PLUMB_TRY(state.read(key));
  screen(recs);
  if (!recs.damaged.empty()) return std::unexpected(recs.damaged.front().error.within("hot-plug"));
  if (recs.records.empty() || !recs.records.front().is_default)
    return fail(cni_code::kUnknownContainer, "hot-plug: " + key.describe() + " is gone");
  const state::AttachmentRecord head = std::move(recs.records.front());
  recs.records.erase(recs.records.begin());
  const cni::Env env = sandbox_env(key, head);
  Kernel k = PLUMB_TRY(open_kernel(env.netns, true));
  int next = head.index;
  for (auto& rec : recs.records) {
    next = std::max(next, rec.index);
    const bool wanted = rec.phase == "ready" && std::any_of(planned.attachments.begin(), planned.attachments.end(),
                                                            [&](const Attachment& a) { return same(rec, a); });
    if (wanted) continue;
    const bool leftover = rec.phase != "ready";  // a hot-plug killed before it completed: rolled back
    auto gone = teardown(env, conf, k, state, rec, /*complete=*/!leftover);
    if (leftover && gone) continue;
    Change c{rec.selection, rec.ifname, false, std::nullopt};
    if (!gone) c.error = gone.error();
    out.changes.push_back(std::move(c));
  }
  for (auto& att : planned.attachments) {
    if (att.element == nullptr) continue;  // clusterNetwork and defaultNetworks: never hot-plugged
    if (std::any_of(recs.records.begin(), recs.records.end(),
                    [&](const auto& r) { return r.phase == "ready" && same(r, att); }))
      continue;
    Change c{att.selection, att.ifname, true, std::nullopt};
    if (auto st = attach_one(env, conf, k, state, head, att, ++next); !st) c.error = st.error();
    out.changes.push_back(std::move(c));
  }
  return status_of(PLUMB_TRY(state.read(key)));
}

}  // namespace

Result<Outcome> apply(const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod, Log& log) {
  state::StateDir state(conf.state_dir);
  Outcome out;
  auto key = PLUMB_TRY(sandbox_of(state, pod));
  if (!key) return out;
  out.sandbox = key->name();
  // Planned before the lock, as an ADD: the API requests never hold the lock a DEL waits for.
  state::Records first = PLUMB_TRY(state.read(*key));
  if (first.records.empty()) return out;
  const cni::Env env = sandbox_env(*key, first.records.front());
  PodPlan planned = PLUMB_TRY(plan(env, conf, store, pod, log));
  std::string status_json;
  {
    auto lock = PLUMB_TRY(state.lock(*key));
    status_json = PLUMB_TRY(change_locked(conf, state, *key, planned, out));
  }
  if (out.changes.empty() || is_system_namespace(conf, pod.namespace_)) return out;
  if (auto st = store.write_network_status(pod, status_json, key->name()); !st) {
    log.error("hot-plug of pod " + pod.namespace_ + "/" + pod.name +
              ": network-status not written: " + st.error().text());
  }
  return out;
}

}  // namespace plumb::pod::hotplug
