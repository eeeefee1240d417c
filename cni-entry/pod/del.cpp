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
  // DEL must tear down the kernel side even when the state directory cannot take a lock file
  // (read-only or full filesystem): then it proceeds unlocked, as best effort.
  auto lock = state.lock_container(env.container_id);
  if (!lock) log.warning("DEL " + env.container_id + ": proceeding without the container lock: " + lock.error().text());
  auto records = PLUMB_TRY(state.read(env.container_id));
  Kernel k = PLUMB_TRY(open_kernel(env.netns, false));
  std::optional<Error> first;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    auto st = teardown(env, conf, k, state, *it, it->phase == "ready");
    if (!st) {
      log.error("DEL " + env.container_id + ": " + st.error().text());
      if (!first) first = st.error();
    }
  }
  source::PodRef pod = pod_ref(env);
  if (!records.empty()) {
    pod.namespace_ = records.front().pod_namespace;
    pod.name = records.front().pod_name;
  }
  remove_status(conf, pod, env.container_id, log);
  if (first) return std::unexpected(*first);
  if (lock) lock->unlink_path();  // nothing of the container is left: no lock file either
  return std::string();
}

void remove_status(const PlumbConfig& conf, const source::PodRef& pod, const std::string& container_id, Log& log) {
  if (pod.name.empty() || is_system_namespace(conf, pod.namespace_)) return;
  // [kube] Errors here are logged, never returned. The API server source makes no request
  // (DEL never waits on the API server); the local store removes its status file when this
  // sandbox wrote it.
  auto store = source::make_source(conf);
  auto st = store ? (*store)->remove_network_status(pod, container_id) : Status(std::unexpected(store.error()));
  if (!st) log.warning(container_id + ": network-status of pod " + pod.namespace_ + "/" + pod.name + " not removed: " + st.error().text());
}

Result<std::string> do_check(const cni::Env& env, const PlumbConfig& conf) {
  state::StateDir state(conf.state_dir);
  auto lock = PLUMB_TRY(state.lock_container(env.container_id));
  auto records = PLUMB_TRY(state.read(env.container_id));
  if (records.empty()) return fail(cni_code::kUnknownContainer, "CHECK: container " + env.container_id + " has no attachments");
  Kernel k = PLUMB_TRY(open_kernel(env.netns, true));
  for (auto& rec : records) {
    if (rec.phase != "ready") return fail(cni_code::kKernel, "CHECK: attachment " + rec.ifname + " never completed");
    if (rec.disable_check) continue;  // the network's conflist says "disableCheck" (CNI 1.1.0, libcni)
    auto r = PLUMB_TRY(cni::decode_result(rec.result, kInternalVersion));
    auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
    ctx.ipam_owner = rec.ipam_owner;
    ctx.attachment_result = &rec.result;
    auto parsed = parse_plugins(rec.config, rec.network, rec.ifname, env.args, ctx.plugin_search, ctx.ipam_cluster);
    if (!parsed) return std::unexpected(parsed.error().within("CHECK: the recorded config of " + state.record_path(rec)));
    for (auto& p : *parsed) {
      auto st = p.driver->check(ctx, *p.config, r);
      if (!st) return std::unexpected(st.error().within("network " + rec.network + " (" + rec.ifname + ")"));
    }
  }
  if (conf.prev_result.IsObject()) {
    auto prev = PLUMB_TRY(cni::decode_result(conf.prev_result, conf.cni_version));
    auto recorded = PLUMB_TRY(cni::decode_result(records.front().result, kInternalVersion));
    for (auto& ip : prev.ips) {
      bool found = std::any_of(recorded.ips.begin(), recorded.ips.end(), [&](auto& r) { return r.address.addr == ip.address.addr; });
      if (!found) return fail(cni_code::kKernel, "CHECK: prevResult address " + ip.address.str() + " is not held by the attachment");
    }
  }
  return std::string();
}

}  // namespace plumb::pod
