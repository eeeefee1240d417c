// GC and STATUS (CNI 1.1.0).
#include <algorithm>
#include <map>
#include <optional>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/claims.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "engine/state/state.hpp"
#include "ipam/ipam.hpp"

namespace plumb::pod {
namespace {

/// The distinct "ipam" objects of recorded plugin configs, keyed by network + config text.
using IpamConfigs = std::map<std::string, std::pair<std::string, json::Document>>;
void collect_ipams(const std::vector<state::AttachmentRecord>& records, IpamConfigs& out) {
  for (const auto& rec : records) {
    if (!rec.config.IsArray()) continue;
    for (const auto& plugin : rec.config.GetArray()) {
      const json::Value* ipam = json::find(plugin, "ipam");
      if (ipam == nullptr || !ipam->IsObject()) continue;
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
  for (const auto& [key, entry] : ipams) {
    auto made = ipam::make(entry.second);
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

}  // namespace

Result<std::string> do_gc(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto containers = PLUMB_TRY(state.containers());
  std::optional<Error> first;
  IpamConfigs ipams;  // [cluster ipam]
  for (auto& cid : containers) {
    auto lock = PLUMB_TRY(state.lock_container(cid));
    auto records = PLUMB_TRY(state.read(cid));
    if (records.empty()) {
      lock.unlink_path();
      continue;
    }
    collect_ipams(records, ipams);  // [cluster ipam]
    const auto& head = records.front();
    bool valid = std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(),
                             [&](auto& v) { return v.first == cid && (!head.is_default || v.second == head.ifname); });
    if (valid) continue;
    cni::Env sub = env;
    sub.container_id = cid;
    auto k = open_kernel(head.netns, false);
    if (!k) {
      if (!first) first = k.error();
      continue;
    }
    bool all_gone = true;
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      auto st = teardown(sub, conf, *k, state, *it, it->phase == "ready");
      if (!st) {
        all_gone = false;
        log.error("GC " + cid + ": " + st.error().text());
        if (!first) first = st.error();
      }
    }
    if (all_gone) lock.unlink_path();
    log.info("GC removed the attachments of container " + cid);
  }
  if (auto st = gc_ipams(conf, state, ipams); !st) {  // [cluster ipam]
    log.error("GC: " + st.error().text());
    if (!first) first = st.error();
  }
  {
    // [kube] addresses held for IPAMClaims that no longer exist (no request without claims).
    auto src = source::make_source(conf);
    auto st = src ? claims::gc(**src, conf.state_dir, log) : Status(std::unexpected(src.error()));
    if (!st && !first) first = st.error();
  }
  if (first) return std::unexpected(*first);
  return std::string();
}

Result<std::string> do_status(const PlumbConfig& conf) {
  state::StateDir state(conf.state_dir);
  auto lock = state.lock_container("status-probe");
  if (!lock) return fail(cni_code::kPluginNotAvailable, "state directory " + conf.state_dir + " is not usable", lock.error().text());
  lock->unlink_path();
  // [kube] the pod source must be usable: the local store's directory readable, or the API
  // server reachable (else 51) with valid credentials (else 50).
  auto src = source::make_source(conf);
  if (!src) return fail(cni_code::kPluginNotAvailable, "plumb's pod source is not configured correctly: " + src.error().text());
  PLUMB_TRY((*src)->ready());
  return std::string();
}

}  // namespace plumb::pod
