// DEL and CHECK: from the state records alone (no NAD, annotation or netns needed for DEL).
#include <algorithm>
#include <optional>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/multus_adopt.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "engine/kernel/ifname.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod {

namespace {

/// Whether attachments can have been recorded under CNI_IFNAME `name`: one ADD accepts
/// (link::valid_ifname), or one valid but for '%', which plumb's ADD once accepted.
bool may_have_records(const std::string& name) {
  std::string probe = name;
  std::replace(probe.begin(), probe.end(), '%', '_');
  return link::valid_ifname(probe);
}

}  // namespace

Result<std::string> do_del(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  if (env.container_id_refused) {
    // An ID every ADD refuses (too long, or not a file name) never named a record, lock or status.
    log.info("DEL of CNI_CONTAINERID \"" + env.container_id.substr(0, 64) + "\" (" + std::to_string(env.container_id.size()) +
             " bytes): an ID ADD refuses, so nothing of it exists");
    return std::string();
  }
  // Nothing exists for a CNI_IFNAME no ADD took (cni::Env lets DEL through with any): the DEL
  // succeeds, as the spec's idempotent DEL asks, and the name never becomes a path.
  if (!may_have_records(env.ifname)) return std::string();
  state::StateDir state(conf.state_dir);
  const state::Key key{env.container_id, env.ifname};
  // DEL must tear down the kernel side even when the state directory cannot take a lock file
  // (read-only or full filesystem): then it proceeds unlocked, as best effort.
  auto lock = state.lock(key);
  if (!lock) log.warning("DEL " + key.describe() + ": proceeding without the lock: " + lock.error().text());
  auto records = PLUMB_TRY(state.read(key));
  if (records.empty()) {
    // Nothing of this sandbox was ever recorded (or it is gone already): nothing to remove but
    // the key's directory an ADD killed before its first record left empty (release() does), and
    // no network-status either (it belongs to whichever sandbox wrote it; this one's went before
    // its records did). A sandbox Multus attached before plumb took the node over is torn down
    // from Multus's cache.
    auto adopted = multus::del(env, conf, log);
    if (lock) state.release(*lock, key);
    if (!adopted) return std::unexpected(adopted.error());
    return std::string();
  }
  std::vector<std::string> networks;
  networks.reserve(records.records.size());
  for (const auto& rec : records.records) networks.push_back(rec.network);
  log.note_networks(std::move(networks));
  Kernel k = PLUMB_TRY(open_kernel(env.netns, false));
  if (k.netns_is_node) log.warning("DEL " + key.describe() + ": CNI_NETNS " + env.netns + " is the node's namespace: pod-side steps skipped");
  source::PodRef pod = pod_ref(env);
  if (!records.records.empty()) {
    pod.namespace_ = records.records.front().pod_namespace;
    pod.name = records.records.front().pod_name;
  }
  // The status goes first (as Multus clears it before its delegates' DEL): a DEL killed at any
  // later step leaves records, and the next DEL, finding them, removes it again; the records
  // vouch for every status GC keeps.
  remove_status(conf, pod, key, log);
  Errors errors;
  teardown_all(env, conf, k, state, key, records, /*keep_disable_gc=*/false, errors);
  // What a newer plumb wrote and this one cannot undo stays recorded for it; the DEL succeeds
  // (failing would make the runtime retry it forever).
  for (const auto& notice : errors.kept()) log.warning("DEL " + key.describe() + ": " + notice);
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
  auto store = make_source(conf);
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
    auto parsed = parse_plugins(rec.config, rec.network, rec.ifname, env.args, ctx.plugin_search, ctx.ipam_cluster,
                                driver_settings(conf));
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
