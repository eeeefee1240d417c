// GC and STATUS (CNI 1.1.0).
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/claims.hpp"
#include "cni-entry/pod/default_network.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "engine/state/state.hpp"
#include "drivers/driver.hpp"
#include "engine/cni/delegate.hpp"
#include "ipam/ipam.hpp"

namespace plumb::pod {
namespace {

/// The distinct "ipam" objects of recorded plugin configs, keyed by network + config text.
using IpamConfigs = std::map<std::string, std::pair<std::string, json::Document>>;
void collect_ipams(const std::vector<state::AttachmentRecord>& records, IpamConfigs& out) {
  for (const auto& rec : records) {
    if (!rec.config.IsArray() || rec.disable_gc) continue;
    for (const auto& plugin : rec.config.GetArray()) {
      const json::Value* ipam = json::find(plugin, "ipam");
      if (ipam == nullptr || !ipam->IsObject()) continue;
      const json::Value* type = json::find(*ipam, "type");
      if (type == nullptr || !type->IsString() || !ipam::implemented(type->GetString())) continue;  // delegated: GC verb below
      std::string key = rec.network + "\n" + json::dump(*ipam);
      if (!out.contains(key)) out.emplace(key, std::pair{rec.network, json::clone(*ipam)});
    }
  }
}

/// Asks each IPAM (Ipam::gc) to release what this node holds for owners that are neither in the
/// valid list nor still recorded here (a record means an ADD in progress or a release pending,
/// which the record's own teardown retries). host-local and static do nothing.
Status gc_ipams(const PlumbConfig& conf, const state::StateDir& state, const IpamConfigs& ipams) {
  ipam::Ipam::KeepFn keep = [&](const std::string& cid, const std::string&) {
    if (std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(), [&](auto& v) { return v.first == cid; })) {
      return true;
    }
    auto recs = state.read(cid);
    return !recs || !recs->empty();
  };
  Status first;
  const ipam::ClusterAccess cluster = ipam_cluster(conf);
  for (const auto& [key, entry] : ipams) {
    auto made = ipam::make(entry.second, nullptr, &cluster);
    Status st = made ? Status{} : Status(std::unexpected(made.error()));
    if (made) {
      ipam::Request req;
      req.network_name = entry.first;
      req.ipam = &entry.second;
      st = (*made)->gc(req, keep);
    }
    if (!st && first) first = std::unexpected(st.error().within("GC of the addresses of network " + entry.first));
  }
  return first;
}

/// The type a plugin config delegates to: its own type when plumb does not implement it, else
/// the type of its "ipam" when plumb does not implement that (the reference plugins pass GC and
/// STATUS on to their IPAM); "" when both are plumb's.
std::string delegated_type(const json::Value& plugin) {
  const json::Value* type = json::find(plugin, "type");
  if (type == nullptr || !type->IsString()) return {};
  if (drivers::find(type->GetString()) == nullptr) return type->GetString();
  const json::Value* ipam = json::find(plugin, "ipam");
  const json::Value* it = ipam != nullptr && ipam->IsObject() ? json::find(*ipam, "type") : nullptr;
  if (it == nullptr || !it->IsString() || ipam::implemented(it->GetString())) return {};
  return it->GetString();
}

/// One delegated plugin (or delegated IPAM of a native plugin) of one network, as recorded, and
/// the attachments of that network GC keeps.
struct DelegatedGc {
  std::string type;
  json::Document config;
  std::vector<std::pair<std::string, std::string>> valid;  // (containerID, ifname)
};
using DelegatedGcs = std::map<std::string, DelegatedGc>;  // key: network + "\n" + type

/// The delegated plugins of `rec` (CNI >= 1.1.0, not disableGC) into `out`; `kept`: the
/// attachment stays, so it is one of the valid attachments the plugin is told about.
void collect_delegated(const state::AttachmentRecord& rec, bool kept, DelegatedGcs& out) {
  if (!rec.config.IsArray() || rec.disable_gc) return;
  for (const auto& plugin : rec.config.GetArray()) {
    const json::Value* v = json::find(plugin, "cniVersion");
    if (v == nullptr || !v->IsString() || cni::compare_versions(v->GetString(), "1.1.0") < 0) continue;
    const std::string t = delegated_type(plugin);
    if (t.empty()) continue;
    auto [entry, added] = out.try_emplace(rec.network + "\n" + t);
    if (added) {
      entry->second.type = t;
      entry->second.config = json::clone(plugin);
    }
    if (kept) entry->second.valid.emplace_back(rec.container_id, rec.ifname);
  }
}

/// CNI GC (1.1.0) to each delegated plugin with the attachments of its network that stay, in
/// cni.dev/valid-attachments (and cni.dev/attachments, as libcni sends both). Returns the first
/// error; every plugin is tried.
Status gc_delegated(const cni::Env& env, const PlumbConfig& conf, const DelegatedGcs& plugins) {
  Status first;
  const auto search = plugin_search(conf, env.path);
  for (const auto& [key, p] : plugins) {
    json::Document sent = json::clone(p.config);
    auto& a = sent.GetAllocator();
    sent.RemoveMember("prevResult");
    sent.RemoveMember("runtimeConfig");
    json::Value list(rapidjson::kArrayType);
    for (const auto& [cid, ifname] : p.valid) {
      json::Value o(rapidjson::kObjectType);
      json::set_string(o, "containerID", cid, a);
      json::set_string(o, "ifname", ifname, a);
      list.PushBack(o, a);
    }
    json::Value copy(list, a);
    json::set(sent, "cni.dev/valid-attachments", std::move(list), a);
    json::set(sent, "cni.dev/attachments", std::move(copy), a);
    auto binary = cni::find_plugin(p.type, search);
    Status st = binary ? Status{} : Status(std::unexpected(binary.error()));
    if (binary) {
      auto out = cni::exec_plugin(p.type, *binary, cni::Invocation{"GC", "", "", "", ""}, json::dump(sent), search);
      if (!out) st = std::unexpected(out.error());
    }
    if (!st && first) first = std::unexpected(st.error().within("GC"));
  }
  return first;
}

/// GC of one container: unless cni.dev/valid-attachments lists it, its attachments are torn down
/// (those of networks whose conflist says "disableGC" stay, as libcni leaves them) and the pod's
/// network-status goes when this sandbox wrote it. Collects IPAMs and delegated plugins first.
Status gc_container(const cni::Env& env, const PlumbConfig& conf, const state::StateDir& state, const std::string& cid,
                    IpamConfigs& ipams, DelegatedGcs& delegated, Log& log) {
  auto lock = PLUMB_TRY(state.lock_container(cid));
  auto records = PLUMB_TRY(state.read(cid));
  if (records.empty()) {
    lock.unlink_path();
    return {};
  }
  collect_ipams(records, ipams);  // [cluster ipam]
  const auto& head = records.front();
  bool valid = std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(),
                           [&](auto& v) { return v.first == cid && (!head.is_default || v.second == head.ifname); });
  for (const auto& rec : records) collect_delegated(rec, valid || rec.disable_gc, delegated);
  if (valid) return {};
  cni::Env sub = env;
  sub.container_id = cid;
  Kernel k = PLUMB_TRY(open_kernel(head.netns, false));
  Status first;
  bool all_gone = true;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->disable_gc) {
      all_gone = false;
      continue;
    }
    auto st = teardown(sub, conf, k, state, *it, it->phase == "ready");
    if (!st) {
      all_gone = false;
      log.error("GC " + cid + ": " + st.error().text());
      if (first) first = std::unexpected(st.error());
    }
  }
  if (!all_gone) return first;
  lock.unlink_path();
  remove_status(conf, source::PodRef{head.pod_namespace, head.pod_name, ""}, cid, log);
  log.info("GC removed the attachments of container " + cid);
  return first;
}

}  // namespace

Result<std::string> do_gc(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto containers = PLUMB_TRY(state.containers());
  std::optional<Error> first;
  auto keep = [&](const Status& st) {
    if (!st && !first) first = st.error();
  };
  IpamConfigs ipams;  // [cluster ipam]
  DelegatedGcs delegated;
  for (auto& cid : containers) keep(gc_container(env, conf, state, cid, ipams, delegated, log));
  if (auto st = gc_ipams(conf, state, ipams); !st) {  // [cluster ipam]
    log.error("GC: " + st.error().text());
    keep(st);
  }
  if (auto st = gc_delegated(env, conf, delegated); !st) {
    log.error("GC: " + st.error().text());
    keep(st);
  }
  {
    // [kube] addresses held for IPAMClaims that no longer exist (no request without claims).
    auto src = source::make_source(conf);
    keep(src ? claims::gc(**src, conf.state_dir, ipam_cluster(conf), log) : Status(std::unexpected(src.error())));
  }
  if (first) return std::unexpected(*first);
  return std::string();
}

namespace {

/// STATUS of the default network's delegated plugins (and delegated IPAMs of its native plugins)
/// when its version has STATUS (1.1.0, libcni GetStatusNetworkList): their error as they gave it.
Status status_of_delegated(const cni::Env& env, const PlumbConfig& conf, const nad::ResolvedNetwork& net) {
  if (cni::compare_versions(net.cni_version, "1.1.0") < 0) return {};
  const auto search = plugin_search(conf, env.path);
  const json::Value* plugins = json::find(net.conflist, "plugins");
  if (plugins == nullptr || !plugins->IsArray()) return {};
  for (const auto& plugin : plugins->GetArray()) {
    const std::string t = delegated_type(plugin);
    if (t.empty()) continue;
    auto binary = cni::find_plugin(t, search);
    if (!binary) return fail(cni_code::kPluginNotAvailable, "default network " + net.name + ": " + binary.error().msg);
    PLUMB_TRY(cni::exec_plugin(t, *binary, cni::Invocation{"STATUS", "", "", "", ""}, json::dump(plugin), search));
  }
  return {};
}

}  // namespace

Result<std::string> do_status(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto lock = state.lock_container("status-probe");
  if (!lock) return fail(cni_code::kPluginNotAvailable, "state directory " + conf.state_dir + " is not usable", lock.error().text());
  lock->unlink_path();
  // [kube] the pod source must be usable: the local store's directory readable, or the API
  // server reachable (else 51) with valid credentials (else 50).
  auto src = source::make_source(conf);
  if (!src) return fail(cni_code::kPluginNotAvailable, "plumb's pod source is not configured correctly: " + src.error().text());
  PLUMB_TRY((*src)->ready());
  // Multus's readiness indicator: STATUS answers now (an ADD would wait for it).
  if (!conf.readiness_indicator_file.empty() && ::access(conf.readiness_indicator_file.c_str(), F_OK) != 0) {
    return fail(cni_code::kPluginNotAvailable, "the default network is not ready: readinessindicatorfile " +
                                                   conf.readiness_indicator_file + " does not exist");
  }
  // An ADD resolves the default network first: a missing or unparsable one fails every ADD.
  auto net = cluster_default(**src, conf);
  if (!net) {
    Error e = net.error();
    if (e.cni_code != cni_code::kPluginNotReady) e.cni_code = cni_code::kPluginNotAvailable;
    log.error("STATUS: " + e.text());
    return std::unexpected(e);
  }
  PLUMB_TRY(status_of_delegated(env, conf, *net));
  return std::string();
}

}  // namespace plumb::pod
