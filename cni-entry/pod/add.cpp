// ADD: plan everything, then attach in order, finish (default route, IPAMClaims, network-status,
// records ready), or undo everything this ADD did (spec 7.2).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/claims.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "cni-entry/source/after_answer.hpp"
#include "engine/state/journal.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod {
namespace {

/// One ADD in progress: the plan, the records written so far and the results.
struct AddRun {
  const cni::Env& env;
  const PlumbConfig& conf;
  Log& log;
  source::PodSource& store;
  source::PodRef pod;
  PodPlan plan;
  state::StateDir state;
  state::Key key;
  Kernel k;
  std::vector<state::AttachmentRecord> records;
  std::vector<cni::CniResult> results;
  size_t started = 0;  ///< attachments that may have changes to undo
  std::string later_status;  ///< network-status left for after the answer (statusAfterAnswer), "" = none
};

/// CRI semantics: an ADD repeated for attachments that exist returns the recorded result; the
/// remains of an ADD that never completed are removed. Damaged remains are reported (the ADD
/// fails after removing what it can; the runtime's DEL and retry then start clean).
Result<std::optional<std::string>> repeat_or_clean(AddRun& run) {
  auto existing = PLUMB_TRY(run.state.read(run.key));
  if (existing.empty()) return std::optional<std::string>{};
  screen(existing);
  auto& recs = existing.records;
  bool all_ready = std::all_of(recs.begin(), recs.end(), [](auto& r) { return r.phase == "ready"; });
  if (existing.damaged.empty() && all_ready && !recs.empty()) {
    const auto& head = recs.front();
    if (head.is_default && head.cni_ifname == run.env.ifname && head.netns == run.env.netns) {
      run.log.info("ADD " + run.key.describe() + ": attachments exist, returning the recorded result");
      return std::optional<std::string>(PLUMB_TRY(encode_for_runtime(head.result, run.conf.cni_version)));
    }
  }
  Errors errors;
  teardown_all(run.env, run.conf, run.k, run.state, run.key, existing, /*keep_disable_gc=*/false, errors);
  auto st = errors.status();
  if (!st) return std::unexpected(st.error().within("remove the remains of an earlier ADD"));
  // Records kept for a newer plumb hold the key's record names: not overwritten.
  if (!errors.kept().empty()) return fail(cni_code::kNewerRecord, "ADD " + run.key.describe() + ": " + errors.kept().front());
  return std::optional<std::string>{};
}

/// Runs every attachment in order; stops at the first failure (its partial changes counted in
/// run.started for the rollback).
Status attach_all(AddRun& run) {
  auto& atts = run.plan.attachments;
  run.records.resize(atts.size());
  for (size_t i = 0; i < atts.size(); ++i) {
    Attachment& att = atts[i];
    auto& rec = run.records[i];
    rec.container_id = run.env.container_id;
    rec.cni_ifname = run.env.ifname;
    rec.index = att.index;
    rec.ifname = att.ifname;
    rec.network = att.net.name;
    rec.selection = att.selection;
    rec.is_default = att.is_default;
    rec.pod_namespace = run.pod.namespace_;
    rec.pod_name = run.pod.name;
    rec.netns = run.env.netns;
    if (att.claim) rec.ipam_owner = att.claim->owner;
    rec.disable_check = att.net.disable_check;
    rec.disable_gc = att.net.disable_gc;
    rec.config.CopyFrom(att.plugins, rec.config.GetAllocator());
    txn::Journal journal(run.state, rec);
    run.started = i + 1;
    run.results.push_back(PLUMB_TRY(run_chain(run.env, run.conf, run.k, att, journal)));
  }
  return {};
}

/// The network-status entries of the pod (spec 5), device-info (5.3.8) included verbatim.
Result<std::vector<nad::StatusEntry>> status_entries(const AddRun& run) {
  std::vector<nad::StatusEntry> status;
  const auto& atts = run.plan.attachments;
  for (size_t i = 0; i < atts.size(); ++i) {
    auto entry = nad::status_from_result(atts[i].status_name, run.results[i], atts[i].ifname, atts[i].is_default);
    if (!atts[i].device_info.file.empty()) {
      auto di = PLUMB_TRY(devinfo::read(atts[i].device_info.file));
      if (di) entry.device_info = std::move(*di);
    }
    if (atts[i].element != nullptr && atts[i].element->default_route) {
      for (auto& gw : *atts[i].element->default_route) entry.default_route.push_back(gw.str());
    }
    status.push_back(std::move(entry));
  }
  return status;
}

/// After every attachment is up: default-route, records "ready" with their result and status
/// entry. Returns the network-status annotation value. Nothing here asks the API server.
Result<std::string> finish(AddRun& run) {
  auto& atts = run.plan.attachments;
  for (auto& att : atts) {
    // default-route on at most one element (validated by the parser).
    if (att.element != nullptr && att.element->default_route) PLUMB_TRY(apply_default_route(run.k, att, run.results, atts));
  }
  std::string status_json = nad::encode_network_status(PLUMB_TRY(status_entries(run)));
  auto status_doc = PLUMB_TRY(json::parse(status_json, "network-status", state::kRecordMaxDepth));
  for (size_t i = 0; i < atts.size(); ++i) {
    auto& rec = run.records[i];
    auto encoded = PLUMB_TRY(cni::encode_result(run.results[i], kInternalVersion));
    rec.result.CopyFrom(encoded, rec.result.GetAllocator());
    if (status_doc.IsArray() && i < status_doc.Size()) {
      rec.status.CopyFrom(status_doc[static_cast<rapidjson::SizeType>(i)], rec.status.GetAllocator());
    }
    rec.phase = "ready";
    auto st = run.state.write(rec);
    if (!st) return std::unexpected(st.error().within("record attachment " + rec.ifname));
  }
  return status_json;
}

/// IPAMClaims without status.ips get the addresses just allocated (spec 8).
Status publish_claims(AddRun& run) {
  auto& atts = run.plan.attachments;
  for (size_t i = 0; i < atts.size(); ++i) {
    if (!atts[i].claim) continue;
    auto st = claims::publish(run.store, *atts[i].claim, run.results[i], run.pod.name);
    if (!st) return std::unexpected(st.error().within(atts[i].where()));
  }
  return {};
}

/// Publishes network-status. With statusErrorsFatal=false (default) a failure is logged and the
/// pod keeps its working networks.
Status publish_status(AddRun& run, const std::string& status_json) {
  if (run.pod.name.empty() || is_system_namespace(run.conf, run.pod.namespace_)) return {};
  auto st = run.store.write_network_status(run.pod, status_json, run.key.name());
  if (st) return {};
  const std::string who = run.pod.namespace_ + "/" + run.pod.name;
  if (run.conf.status_errors_fatal) return std::unexpected(st.error().within("write network-status of pod " + who));
  run.log.error("ADD " + run.env.container_id + ": network-status of pod " + who + " not written (" + run.store.describe() +
                "), the attachments stay (statusErrorsFatal is false): " + st.error().text());
  return {};
}

/// statusAfterAnswer: a daemon worker (one that runs work after the answer) writes network-status
/// on the API server once the runtime has its answer. An exec'd plumb writes it before, as
/// without the key: its runtime waits for the process to end anyway, so nothing would be gained.
/// The embedded store's status is a local file: written before the answer too.
bool status_after_answer(const AddRun& run) {
  return run.conf.status_after_answer && source::after_answer_queue() != nullptr && run.store.status_is_remote() &&
         !run.pod.name.empty() && !is_system_namespace(run.conf, run.pod.namespace_);
}

/// 7.2: undoes everything this ADD did, newest first, shared objects it created included; what
/// fails stays recorded for a DEL.
void rollback(AddRun& run) {
  for (size_t i = run.started; i-- > 0;) {
    auto st = teardown(run.env, run.conf, run.k, run.state, run.records[i], /*complete=*/false);
    if (!st) run.log.error("ADD " + run.key.describe() + " rollback: " + st.error().text() + " (a DEL will retry)");
  }
}

/// The part of an ADD done under the key's lock: every kernel change and every record. Returns
/// the network-status to publish.
Result<std::string> attach_locked(AddRun& run, std::optional<std::string>& repeated) {
  auto lock = PLUMB_TRY(run.state.lock(run.key));
  auto done = repeat_or_clean(run);
  if (!done || *done) {
    if (done) repeated = std::move(**done);
    run.state.release(lock, run.key);
    if (!done) return std::unexpected(done.error());
    return std::string();
  }
  Status st = attach_all(run);
  Result<std::string> status_json = st ? finish(run) : Result<std::string>(std::unexpected(st.error()));
  if (!status_json) {
    rollback(run);
    run.state.release(lock, run.key);  // nothing was left: no lock file either
  }
  return status_json;
}

/// An ADD that failed after its lock was released (an IPAMClaim or network-status write): its
/// attachments are undone unless a DEL removed them meanwhile.
void undo_published(AddRun& run) {
  auto lock = run.state.lock(run.key);
  auto left = lock ? run.state.read(run.key) : Result<state::Records>(std::unexpected(lock.error()));
  if (!left) {
    run.log.error("ADD " + run.key.describe() + " rollback: " + left.error().text() + " (a DEL will retry)");
    return;
  }
  Errors errors;
  teardown_all(run.env, run.conf, run.k, run.state, run.key, *left, /*keep_disable_gc=*/false, errors);
  if (!errors.empty()) run.log.error("ADD " + run.key.describe() + " rollback: " + errors.status().error().text() + " (a DEL will retry)");
  for (const auto& notice : errors.kept()) run.log.warning("ADD " + run.key.describe() + " rollback: " + notice);
  run.state.release(*lock, run.key);
}

/// Multus's events of an ADD (pkg/multus: delegateAdd's and cmdAdd's messages): "Add <ifname>
/// [<addresses>] from <network>" (AddedInterface) per attachment when it succeeded, else one
/// Warning with the failing network and the error.
std::vector<source::PodEvent> events_of(const AddRun& run, const Result<std::string>& outcome) {
  std::vector<source::PodEvent> events;
  const auto& atts = run.plan.attachments;
  if (outcome) {
    for (size_t i = 0; i < atts.size() && i < run.results.size(); ++i) {
      std::string ips;
      for (const auto& ip : run.results[i].ips) ips += (ips.empty() ? "" : " ") + ip.address.str();
      std::string note = "Add " + atts[i].ifname + " [" + ips + "]";
      if (!atts[i].status_name.empty()) note += " from " + atts[i].status_name;
      events.push_back({false, "AddedInterface", "AddInterface", std::move(note)});
    }
  } else {
    const std::string network = run.started > 0 ? atts[run.started - 1].status_name : std::string();
    std::string note =
        network.empty() ? "error adding container: " : "error adding container to network \"" + network + "\": ";
    events.push_back({true, "ErrorAddingInterface", "AddInterface", note + outcome.error().text()});
  }
  return events;
}

/// The Events' reportingInstance: plumb on its node ("plumb@<NODE_NAME or nodeName>").
std::string event_instance(const PlumbConfig& conf) {
  std::string node = conf.node_name;
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr && *n != '\0') node = n;
  return "plumb@" + node;
}

/// The log as the ADD's configuration sets it up, for work done after the answer (the ADD's own
/// Log belongs to the invocation).
struct LaterLog {
  std::string level, file;
  bool to_stderr = true;
  explicit LaterLog(const PlumbConfig& conf)
      : level(conf.log_level), file(conf.log_file), to_stderr(conf.log_to_stderr) {}
  Log open() const {
    Log log;
    log.configure(level, file, to_stderr);
    return log;
  }
};

/// Posts the ADD's Events once the runtime has its answer (source/after_answer.hpp: a daemon
/// worker's after answering its shim; an exec'd plumb's at once), with the pod source, which
/// they share; a refused post is logged, never the ADD's failure. Nothing is queued when the
/// source posts no Events (the local store): the worker is free at once.
void post_events(const AddRun& run, const Result<std::string>& outcome, const std::shared_ptr<source::PodSource>& src) {
  if (run.pod.name.empty() || !src->posts_events()) return;
  source::after_answer([src, events = events_of(run, outcome), pod = run.pod, instance = event_instance(run.conf),
                        who = "ADD " + run.env.container_id, log = LaterLog(run.conf)] {
    if (auto st = src->post_events(pod, events, instance); !st)
      log.open().warning(who + ": Events of pod " + pod.namespace_ + "/" + pod.name +
                         " not posted: " + st.error().text());
  });
}

/// Attempts of a network-status write after the answer, and the wait before the second (doubled
/// before each next one).
constexpr int kLaterStatusAttempts = 4;
constexpr std::chrono::milliseconds kLaterStatusBackoff{500};

/// statusAfterAnswer (status_after_answer()): writes run.later_status once the runtime has its
/// answer, only while the sandbox's attachments are recorded (a DEL that came meanwhile, and the
/// next sandbox's status write after it, are never overtaken: write_network_status_if). A failed
/// write is retried with back-off up to kLaterStatusAttempts times (not a replaced pod's), then
/// logged as an error and reported on the pod as a Warning Event; never the ADD's failure.
void write_status_later(const AddRun& run, const std::shared_ptr<source::PodSource>& src) {
  source::after_answer([src, pod = run.pod, status = run.later_status, owner = run.key.name(), root = run.state.root(),
                        cid = run.env.container_id, instance = event_instance(run.conf), later = LaterLog(run.conf)] {
    Log log = later.open();
    const std::string what = "ADD " + cid + ": network-status of pod " + pod.namespace_ + "/" + pod.name;
    const std::function<bool()> current = [&] { return state::StateDir(root).has_records(cid); };
    auto wait = kLaterStatusBackoff;
    for (int attempt = 1;; ++attempt) {
      auto written = src->write_network_status_if(pod, status, owner, current);
      if (written) {
        if (!*written) log.info(what + " not written: the sandbox was deleted meanwhile");
        return;
      }
      const std::string error = written.error().text();
      if (attempt < kLaterStatusAttempts && written.error().cni_code != cni_code::kConflict) {
        log.warning(what + " not written (attempt " + std::to_string(attempt) + " of " +
                    std::to_string(kLaterStatusAttempts) + "), tried again in " + std::to_string(wait.count()) +
                    " ms: " + error);
        std::this_thread::sleep_for(wait);
        wait *= 2;
        continue;
      }
      log.error(what + " not written after " + std::to_string(attempt) + " attempt(s), the attachments stay: " + error);
      const source::PodEvent event{
          true, "ErrorWritingNetworkStatus", "WriteNetworkStatus",
          "network-status of pod " + pod.namespace_ + "/" + pod.name + " not written: " + error};
      if (auto st = src->post_events(pod, {event}, instance); !st)
        log.warning(what + ": Warning Event not posted: " + st.error().text());
      return;
    }
  });
}

/// The ADD once its pod source is set up: plan, attach, publish.
Result<std::string> add_with(AddRun& run) {
  const auto& env = run.env;
  run.k = PLUMB_TRY(open_kernel(env.netns, true));
  run.plan = PLUMB_TRY(plan(env, run.conf, run.store, run.pod, run.log));
  std::vector<std::string> networks;
  networks.reserve(run.plan.attachments.size());
  for (const auto& att : run.plan.attachments) networks.push_back(att.status_name);
  run.log.note_networks(std::move(networks));

  std::optional<std::string> repeated;
  auto status_json = PLUMB_TRY(attach_locked(run, repeated));
  if (repeated) return *repeated;
  // The lock is released: a DEL of this sandbox never waits for the API server below (it removes
  // what is recorded; the status written after it is the pod's next sandbox's to replace).
  Status st = publish_claims(run);
  if (st && status_after_answer(run))
    run.later_status = std::move(status_json);
  else if (st)
    st = publish_status(run, status_json);
  if (!st) {
    undo_published(run);
    return std::unexpected(st.error());
  }
  run.log.info("ADD " + env.container_id + ": " + std::to_string(run.plan.attachments.size()) + " attachment(s) (" +
               env.ifname + ")");
  return encode_for_runtime(run.records.front().result, run.conf.cni_version);
}

}  // namespace

Result<std::string> do_add(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  // Everything that can be refused is refused before the lock is taken and before any change:
  // the pod's namespace (never the node's), the plan (the pod source, maybe the API server, and
  // every plugin parsed).
  std::shared_ptr<source::PodSource> store = PLUMB_TRY(make_source(conf));
  PLUMB_TRY(await_readiness(conf));  // Multus: the default network must be ready first
  AddRun run{env,
             conf,
             log,
             *store,
             pod_ref(env),
             {},
             state::StateDir(conf.state_dir),
             state::Key{env.container_id, env.ifname},
             {},
             {},
             {},
             0,
             {}};
  auto out = add_with(run);
  if (out && !run.later_status.empty()) write_status_later(run, store);
  if (!out || run.results.size() == run.plan.attachments.size())
    post_events(run, out, store);  // not for a repeated ADD
  return out;
}

}  // namespace plumb::pod
