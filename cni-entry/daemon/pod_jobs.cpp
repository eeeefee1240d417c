// The daemon's pod jobs (pod_jobs.hpp): hot-plug and the release of a deleted pod's addresses.
#include "cni-entry/daemon/pod_jobs.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/hotplug.hpp"
#include "cni-entry/reconcile/pod_deleted.hpp"
#include "engine/base/file.hpp"
#include "engine/k8s/client.hpp"
#include "engine/state/state.hpp"
#include "ipam/cluster_kube.hpp"

namespace plumb::daemon::pod_jobs {
namespace {

const json::Value* member(const json::Value& obj, std::initializer_list<std::string_view> path) {
  const json::Value* v = &obj;
  for (auto key : path) {
    v = v->IsObject() ? json::find(*v, key) : nullptr;
    if (v == nullptr) return nullptr;
  }
  return v;
}

std::string string_at(const json::Value& obj, std::initializer_list<std::string_view> path) {
  const json::Value* v = member(obj, path);
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

bool host_network(const json::Value& pod) {
  const json::Value* v = member(pod, {"spec", "hostNetwork"});
  return v != nullptr && v->IsBool() && v->GetBool();
}

/// The selection annotation of a Pod object; nullopt when it has none.
std::optional<std::string> selection(const json::Value& pod) {
  const json::Value* v = member(pod, {"metadata", "annotations", nad::kNetworksAnnotation});
  if (v == nullptr || !v->IsString()) return std::nullopt;
  return std::string(v->GetString(), v->GetStringLength());
}

Job job_for(Job::Kind kind, const json::Value& pod) {
  return Job{kind, string_at(pod, {"metadata", "namespace"}), string_at(pod, {"metadata", "name"})};
}

using Events = std::vector<source::PodEvent>;

/// The hot-plug, each change a log line and an Event with multus-dynamic-networks-controller's
/// reasons and messages.
int run_hotplug(const Job& job, const pod::PlumbConfig& conf, source::PodSource& store, pod::Log& log, Events& events) {
  const std::string who = job.ns + "/" + job.name;
  auto out = pod::hotplug::apply(conf, store, source::PodRef{job.ns, job.name, ""}, log);
  if (!out) {
    log.error("hot-plug of pod " + who + ": " + out.error().text());
    events.push_back({true, "FailedAddingInterface", "AddInterface", "pod [" + who + "]: " + out.error().text()});
    return 1;
  }
  int rc = 0;
  for (const auto& c : out->changes) {
    const std::string action =
        c.added ? (c.error ? "failed adding" : "added") : (c.error ? "failed removing" : "removed");
    std::string message = "pod [" + who + "]: " + action + " interface " + c.ifname + (c.added ? " to" : " from") +
                          " network: " + c.network;
    const char* reason = c.added ? (c.error ? "FailedAddingInterface" : "AddedInterface")
                                 : (c.error ? "FailedRemovingInterface" : "RemovedInterface");
    if (c.error) {
      message += ": " + c.error->text();
      log.error("hot-plug (" + out->sandbox + "): " + message);
      rc = 1;
    } else {
      log.info("hot-plug (" + out->sandbox + "): " + message);
    }
    events.push_back({c.error.has_value(), reason, c.added ? "AddInterface" : "RemoveInterface", message});
  }
  return rc;
}

/// The release of a deleted pod's addresses in whereabouts' objects (the Kubernetes datastore).
int run_release(const Job& job, const pod::PlumbConfig& conf, pod::Log& log, Events& events) {
  auto creds = k8s::configured(conf.kubeconfig);
  if (!creds) {
    log.error("release of the addresses of deleted pod " + job.ns + "/" + job.name + ": " + creds.error().text());
    return 1;
  }
  if (!*creds) return 0;  // no API server: no whereabouts objects
  std::string ns = conf.whereabouts_namespace.empty() ? (*creds)->namespace_ : conf.whereabouts_namespace;
  if (ns.empty()) ns = ipam::cluster::kDefaultPoolNamespace;
  auto client = k8s::client_for(std::move(**creds), pod::api_options(conf));  // the pod source's when kept
  const state::StateDir state(conf.state_dir);
  auto report = reconcile::release_deleted_pod(*client, ns, job.ns, job.name,
                                               [&](const std::string& id) { return state.has_records(id); });
  for (const auto& act : report.actions) {
    log.info("released " + act.what + ": " + act.reason);
    events.push_back({false, "AddressReleased", "ReleaseAddress", "released " + act.what + ": " + act.reason});
  }
  for (const auto& e : report.errors)
    log.error("release of the addresses of deleted pod " + job.ns + "/" + job.name + ": " + e.text());
  return report.errors.empty() ? 0 : 1;
}

}  // namespace

std::optional<Job> on_update(const json::Value& old_pod, const json::Value& new_pod) {
  if (host_network(new_pod) || member(new_pod, {"metadata", "deletionTimestamp"}) != nullptr) return std::nullopt;
  if (selection(old_pod) == selection(new_pod)) return std::nullopt;
  return job_for(Job::Kind::Hotplug, new_pod);
}

std::optional<Job> on_delete(const json::Value& pod) {
  if (host_network(pod)) return std::nullopt;
  return job_for(Job::Kind::ReleaseAddresses, pod);
}

int run(const Job& job, const pod::PlumbConfig& conf, pod::Log& log, EventFn on_event, void* ctx) {
  auto store = pod::make_source(conf);
  if (!store) {
    log.error("pod " + job.ns + "/" + job.name + ": " + store.error().text());
    return 1;
  }
  Events events;
  const int rc = job.kind == Job::Kind::Hotplug ? run_hotplug(job, conf, **store, log, events)
                                                : run_release(job, conf, log, events);
  if (events.empty()) return rc;
  for (const auto& e : events) {
    if (on_event != nullptr) on_event(ctx, job, e.warning ? "Warning" : "Normal", e.reason, e.note);
  }
  std::string node = conf.node_name;
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr && *n != '\0') node = n;
  if (auto st = (*store)->post_events(source::PodRef{job.ns, job.name, ""}, events, "plumb@" + node); !st) {
    log.warning("Events of pod " + job.ns + "/" + job.name + " not posted: " + st.error().text());
  }
  return rc;
}

pid_t start(const Job& job, const pod::PlumbConfig& conf, pod::Log& log, EventFn on_event, void* ctx) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    k8s::keep_clients(true);  // the job's requests and Events on one API server connection
    ::_exit(run(job, conf, log, on_event, ctx));
  }
  return pid;
}

Result<pod::PlumbConfig> node_config(const std::string& path) {
  auto list = PLUMB_TRY(json::parse(PLUMB_TRY(read_file(path, "plumb's conflist")), path));
  const json::Value* plugins = list.IsObject() ? json::find(list, "plugins") : nullptr;
  if (plugins != nullptr && plugins->IsArray()) {
    for (const auto& p : plugins->GetArray()) {
      const std::string type = string_at(p, {"type"});
      if (type != "plumb-shim" && type != "plumb") continue;
      json::Document conf = json::clone(p);
      json::set_string(conf, "name", string_at(list, {"name"}), conf.GetAllocator());
      json::set_string(conf, "cniVersion", string_at(list, {"cniVersion"}), conf.GetAllocator());
      return pod::parse_config(json::dump(conf));
    }
  }
  return fail(cni_code::kInvalidConfig, path + " has no \"plumb-shim\" or \"plumb\" plugin");
}

void Starter::pod_updated(std::string_view old_json, std::string_view new_json) {
  if (old_json.empty()) return;
  auto before = json::parse(old_json, "pod");
  auto now = json::parse(new_json, "pod");
  if (!before || !now) return;
  if (auto job = on_update(*before, *now)) launch(*job);
}

void Starter::pod_deleted(std::string_view last_json) {
  auto last = json::parse(last_json, "pod");
  if (!last) return;
  if (auto job = on_delete(*last)) launch(*job);
}

/// Forks the job's process; the daemon's wait loop reaps it. Its log lines go to the daemon's
/// stderr (info and above: each change is one).
void Starter::launch(const Job& job) const {
  const pid_t pid = ::fork();
  if (pid != 0) {
    if (pid < 0)
      std::fprintf(stderr, "plumb daemon: fork for pod %s/%s: %s\n", job.ns.c_str(), job.name.c_str(),
                   std::strerror(errno));
    return;
  }
  pod::Log log;
  auto conf = node_config(conflist_);
  if (!conf) {
    log.configure("info", "", true);
    log.error("pod " + job.ns + "/" + job.name + ": " + conf.error().text());
    ::_exit(1);
  }
  log.configure(conf->log_level == "debug" ? "debug" : "info", "", true);
  k8s::keep_clients(true);  // the job's requests and Events on one API server connection
  ::_exit(run(job, *conf, log));
}

}  // namespace plumb::daemon::pod_jobs
