// DEL and CHECK: from the state records alone (no NAD, annotation or netns needed for DEL).
#include <algorithm>
#include <optional>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod {

Result<std::string> do_del(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  const state::Key key{env.container_id, env.ifname};
  // DEL must tear down the kernel side even when the state directory cannot take a lock file
  // (read-only or full filesystem): then it proceeds unlocked, as best effort.
  auto lock = state.lock(key);
  if (!lock) log.warning("DEL " + key.describe() + ": proceeding without the lock: " + lock.error().text());
  auto records = PLUMB_TRY(state.read(key));
  if (records.empty()) {
    // Nothing of this sandbox was ever recorded (or it is gone already): nothing to remove, and
    // no network-status either (it belongs to whichever sandbox wrote it).
    if (lock) state.release(*lock, key);
    return std::string();
  }
  Kernel k = PLUMB_TRY(open_kernel(env.netns, false));
  if (k.netns_is_node) log.warning("DEL " + key.describe() + ": CNI_NETNS " + env.netns + " is the node's namespace: pod-side steps skipped");
  source::PodRef pod = pod_ref(env);
  if (!records.records.empty()) {
    pod.namespace_ = records.records.front().pod_namespace;
    pod.name = records.records.front().pod_name;
  }
  Errors errors;
  teardown_all(env, conf, k, state, key, records, /*quarantine_newer=*/false, /*keep_disable_gc=*/false, errors);
  // What a newer plumb wrote and this one cannot undo stays recorded for it; the DEL succeeds
  // (failing would make the runtime retry it forever).
  for (const auto& notice : errors.kept()) log.warning("DEL " + key.describe() + ": " + notice);
  remove_status(conf, pod, key, log);
  if (!errors.empty()) {
    auto st = errors.status();
    log.error("DEL " + key.describe() + ": " + st.error().text());
    return std::unexpected(st.error());
  }
  if (lock) state.release(*lock, key);  // nothing of the key is left: no lock file either
  return std::string();
}

void remove_status(const PlumbConfig& conf, const source::PodRef& pod, const state::Key& owner, Log& log) {
  if (pod.name.empty() || is_system_namespace(conf, pod.namespace_)) return;
  // [kube] Errors here are logged, never returned. The API server source makes no request
  // (DEL never waits on the API server); the local store removes its status file when this
  // sandbox wrote it.
  auto store = source::make_source(conf);
  auto st = store ? (*store)->remove_network_status(pod, owner.name()) : Status(std::unexpected(store.error()));
  if (!st) log.warning(owner.describe() + ": network-status of pod " + pod.namespace_ + "/" + pod.name + " not removed: " + st.error().text());
}

namespace {

/// CHECK of recorded attachments against the kernel, and prevResult's addresses.
Status check_records(const cni::Env& env, const PlumbConfig& conf, Kernel& k, std::vector<state::AttachmentRecord>& records) {
  for (auto& rec : records) {
    if (rec.phase != "ready") return fail(cni_code::kKernel, "CHECK: attachment " + rec.ifname + " never completed");
    if (rec.disable_check) continue;  // the network's conflist says "disableCheck" (CNI 1.1.0, libcni)
    auto r = PLUMB_TRY(cni::decode_result(rec.result, kInternalVersion));
    auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
    ctx.ipam_owner = rec.ipam_owner;
    ctx.attachment_result = &rec.result;
    auto parsed = parse_plugins(rec.config, rec.network, rec.ifname, env.args, ctx.plugin_search, ctx.ipam_cluster);
    if (!parsed) return std::unexpected(parsed.error().within("CHECK: the recorded config of " + rec.origin));
    for (auto& p : *parsed) {
      auto st = p.driver->check(ctx, *p.config, r);
      if (!st) return std::unexpected(st.error().within("network " + rec.network + " (" + rec.ifname + ")"));
    }
  }
  if (conf.prev_result.IsObject()) {
    auto prev = PLUMB_TRY(cni::decode_result(conf.prev_result, conf.cni_version));
    auto recorded = PLUMB_TRY(cni::decode_result(records.front().result, kInternalVersion));
    for (auto& ip : prev.ips) {
      bool held = std::any_of(recorded.ips.begin(), recorded.ips.end(), [&](auto& r) { return r.address.addr == ip.address.addr; });
      if (!held) return fail(cni_code::kKernel, "CHECK: prevResult address " + ip.address.str() + " is not held by the attachment");
    }
  }
  return {};
}

}  // namespace

Result<std::string> do_check(const cni::Env& env, const PlumbConfig& conf) {
  state::StateDir state(conf.state_dir);
  const state::Key key{env.container_id, env.ifname};
  PLUMB_TRY(refuse_node_netns(env.netns));
  // CHECK changes nothing: an unknown sandbox is answered without taking (creating) a lock.
  if (PLUMB_TRY(state.read(key)).empty()) {
    return fail(cni_code::kUnknownContainer, "CHECK: " + key.describe() + " has no attachments");
  }
  auto lock = PLUMB_TRY(state.lock(key));
  auto found = state.read(key);
  if (!found || found->empty()) {
    state.release(lock, key);
    if (!found) return std::unexpected(found.error());
    return fail(cni_code::kUnknownContainer, "CHECK: " + key.describe() + " has no attachments");
  }
  screen(*found);
  if (!found->damaged.empty()) return std::unexpected(found->damaged.front().error.within("CHECK"));
  Kernel k = PLUMB_TRY(open_kernel(env.netns, true));
  PLUMB_TRY(check_records(env, conf, k, found->records));
  return std::string();
}

}  // namespace plumb::pod
