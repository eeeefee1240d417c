// GC and STATUS (CNI 1.1.0).
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/claims.hpp"
#include "cni-entry/pod/default_network.hpp"
#include "cni-entry/pod/multus_adopt.hpp"
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
    return state.has_records(cid);
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

/// GC of one key (container ID, CNI_IFNAME): unless cni.dev/valid-attachments lists it, its
/// attachments are torn down (those of networks whose conflist says "disableGC" stay, as libcni
/// leaves them), its damaged records go to quarantine (a newer plumb's are kept for it), and the pod's
/// network-status goes when these attachments wrote it. Collects IPAMs and delegated plugins
/// first. Every problem goes to `errors`; GC goes on with the other keys.
void gc_key(const cni::Env& env, const PlumbConfig& conf, const state::StateDir& state, const state::Key& key,
            IpamConfigs& ipams, DelegatedGcs& delegated, Log& log, Errors& errors) {
  auto lock = state.lock(key);
  if (!lock) return errors.add(lock.error().within("GC"));
  auto records = state.read(key);
  if (!records) return errors.add(records.error().within("GC"));
  if (records->empty()) return state.release(*lock, key);
  collect_ipams(records->records, ipams);  // [cluster ipam]
  // A legacy directory of an unknown owner (no index-0 record) is valid when its container is.
  bool valid = std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(),
                           [&](auto& v) { return v.first == key.container_id && (key.ifname.empty() || v.second == key.ifname); });
  for (const auto& rec : records->records) collect_delegated(rec, valid || rec.disable_gc, delegated);
  if (valid) {
    for (const auto& d : records->damaged) log.warning("GC: " + d.error.text() + " (left in place: the attachment is still valid)");
    return;
  }
  cni::Env sub = env;
  sub.container_id = key.container_id;
  sub.ifname = key.ifname;
  const std::string netns = records->records.empty() ? std::string() : records->records.front().netns;
  auto k = open_kernel(netns, false);
  if (!k) return errors.add(k.error().within("GC " + key.describe()));
  std::optional<source::PodRef> pod;
  if (!records->records.empty()) pod = source::PodRef{records->records.front().pod_namespace, records->records.front().pod_name, ""};
  Errors mine;
  bool all_gone = teardown_all(sub, conf, *k, state, key, *records, /*keep_disable_gc=*/true, mine);
  for (const auto& notice : mine.kept()) log.warning("GC " + key.describe() + ": " + notice);
  if (!mine.empty()) {
    log.error("GC " + key.describe() + ": " + mine.status().error().text());
    errors.add(mine.status().error());
  }
  if (!all_gone) return;
  state.release(*lock, key);
  if (pod) remove_status(conf, *pod, key, log);
  log.info("GC removed the attachments of " + key.describe());
}

/// Removes the network-status no record vouches for: its owner's container has no record left
/// (a DEL or GC killed after the records went and before the status did). After the keys' GC,
/// so the status of every key it tore down is gone by then too. Problems are logged: they fail
/// no GC (as DEL's removal of a status).
void remove_unvouched_status(source::PodSource& src, const state::StateDir& state, Log& log) {
  auto removed = src.remove_unvouched_status([&](std::string_view owner) {
    return state.has_records(std::string(owner.substr(0, owner.find(':'))));
  });
  if (!removed) return log.warning("GC: network-status not vouched for by a record not removed: " + removed.error().text());
  for (const auto& pod : *removed) log.info("GC removed the network-status of pod " + pod + ": no record of its owner is left");
}

}  // namespace

Result<std::string> do_gc(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto keys = PLUMB_TRY(state.keys());
  Errors errors;
  IpamConfigs ipams;  // [cluster ipam]
  DelegatedGcs delegated;
  for (auto& key : keys) gc_key(env, conf, state, key, ipams, delegated, log, errors);
  multus::gc(env, conf, log, errors);                 // the sandboxes Multus attached before plumb took the node over
  if (auto st = gc_ipams(conf, state, ipams); !st) {  // [cluster ipam]
    log.error("GC: " + st.error().text());
    errors.add(st);
  }
  if (auto st = gc_delegated(env, conf, delegated); !st) {
    log.error("GC: " + st.error().text());
    errors.add(st);
  }
  {
    auto src = make_source(conf);
    if (src) remove_unvouched_status(**src, state, log);
    // [kube] addresses held for IPAMClaims that no longer exist (no request without claims).
    errors.add(src ? claims::gc(**src, conf.state_dir, ipam_cluster(conf), log) : Status(std::unexpected(src.error())));
  }
  auto st = errors.status();
  if (!st) return std::unexpected(st.error());
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
  const state::Key probe{"status-probe", "lo"};
  auto lock = state.lock(probe);
  if (!lock) return fail(cni_code::kPluginNotAvailable, "state directory " + conf.state_dir + " is not usable", lock.error().text());
  state.release(*lock, probe);
  // [kube] the pod source must be usable: the local store's directory readable, or the API
  // server reachable (else 51) with valid credentials (else 50).
  auto src = make_source(conf);
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
