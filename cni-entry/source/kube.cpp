// The Kubernetes API server as a PodSource (see kube.hpp): the reads and writes plumb needs, on
// the API client of engine/k8s (credentials, timeouts, retries, backoff).
#include "cni-entry/source/kube.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/source/watched.hpp"
#include "engine/base/json.hpp"
#include "engine/k8s/client.hpp"

namespace plumb::source::kube {
namespace {

using http::Response;
using k8s::kMergePatch;
using k8s::meta_string;
using k8s::object_of;

constexpr std::string_view kConfigSource = "kubernetes.io/config.source";
/// Writes retried after a 409 (each after re-reading the object).
constexpr int kConflictRetries = 5;

// ---- the PodSource ----

std::string pod_path(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/pods/" + name;
}
std::string nad_path(const std::string& ns, const std::string& name) {
  return "/apis/k8s.cni.cncf.io/v1/namespaces/" + ns + "/network-attachment-definitions/" + name;
}
std::string claim_path(const std::string& ns, const std::string& name) {
  return "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/" + ns + "/ipamclaims/" + name;
}

Status check_ns(const std::string& what, const std::string& ns) {
  if (!nad::is_dns1123_label(ns))
    return fail(cni_code::kInvalidConfig, what + " namespace \"" + ns + "\" is not a valid DNS-1123 label");
  return {};
}
Status check_name(const std::string& what, const std::string& name) {
  if (!nad::is_dns1123_subdomain(name))
    return fail(cni_code::kInvalidConfig, what + " name \"" + name + "\" is not a valid DNS-1123 subdomain");
  return {};
}

std::map<std::string, std::string> annotations_of(const json::Value& obj) {
  std::map<std::string, std::string> out;
  const json::Value* meta = json::find(obj, "metadata");
  const json::Value* ann = meta != nullptr ? json::find(*meta, "annotations") : nullptr;
  if (ann == nullptr || !ann->IsObject()) return out;
  for (auto it = ann->MemberBegin(); it != ann->MemberEnd(); ++it) {
    if (it->value.IsString()) out[it->name.GetString()] = it->value.GetString();
  }
  return out;
}

/// An events.k8s.io/v1 Event about pod `ref` (uid `uid`, "" = unknown): named as client-go's
/// recorder names them (the pod's name, '.', the time in hexadecimal nanoseconds, plus `seq`
/// for several in one invocation), eventTime in microseconds, reported by Multus's controller
/// name ("multus", its event source component) from `instance`.
json::Document event_json(const PodRef& ref, const std::string& uid, const PodEvent& e, const std::string& instance,
                          size_t seq) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::tm tm{};
  gmtime_r(&now.tv_sec, &tm);
  char when[40], name_suffix[40];
  const size_t n = std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(when + n, sizeof when - n, ".%06ldZ", now.tv_nsec / 1000);
  const auto nanos = static_cast<unsigned long long>(now.tv_sec) * 1'000'000'000ULL +
                     static_cast<unsigned long long>(now.tv_nsec) + seq;
  std::snprintf(name_suffix, sizeof name_suffix, ".%llx", nanos);
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::set_string(d, "apiVersion", "events.k8s.io/v1", a);
  json::set_string(d, "kind", "Event", a);
  json::Value meta(rapidjson::kObjectType);
  json::set_string(meta, "name", ref.name + name_suffix, a);
  json::set_string(meta, "namespace", ref.namespace_, a);
  json::set(d, "metadata", std::move(meta), a);
  json::set_string(d, "eventTime", when, a);
  json::set_string(d, "reportingController", "multus", a);
  json::set_string(d, "reportingInstance", instance, a);
  json::set_string(d, "action", e.action, a);
  json::set_string(d, "reason", e.reason, a);
  json::set_string(d, "note", e.note.substr(0, 1024), a);  // the API server refuses notes over 1 kB
  json::set_string(d, "type", e.warning ? "Warning" : "Normal", a);
  json::Value regarding(rapidjson::kObjectType);
  json::set_string(regarding, "apiVersion", "v1", a);
  json::set_string(regarding, "kind", "Pod", a);
  json::set_string(regarding, "namespace", ref.namespace_, a);
  json::set_string(regarding, "name", ref.name, a);
  if (!uid.empty()) json::set_string(regarding, "uid", uid, a);
  json::set(d, "regarding", std::move(regarding), a);
  return d;
}

class KubeSource final : public PodSource {
 public:
  KubeSource(Credentials creds, Options opts, std::string probe_ns)
      : client_(k8s::client_for(std::move(creds), opts)), probe_ns_(std::move(probe_ns)) {}

  std::string describe() const override {
    return "API server " + client_->credentials().server + " (" + client_->credentials().origin + ")";
  }

  Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const PodRef& ref) override {
    auto info = PLUMB_TRY(pod(ref));
    if (!info) return std::optional<std::map<std::string, std::string>>{};
    return std::optional<std::map<std::string, std::string>>(std::move(info->annotations));
  }

  /// The object `ns/name` of `kind` from the daemon's watched cache, when a worker has one and it
  /// holds the object and `usable` accepts it; nullopt otherwise (the caller GETs it).
  std::optional<json::Document> cached(Watched kind, const std::string& ns, const std::string& name,
                                       const std::function<bool(const json::Document&)>& usable = {}) {
    WatchedObjects* cache = watched_objects();
    if (cache == nullptr) return std::nullopt;
    auto text = cache->find(kind, client_->credentials().server, ns, name);
    if (!text) return std::nullopt;
    auto d = json::parse(*text, "watched object");
    if (!d || !d->IsObject() || (usable && !usable(*d))) return std::nullopt;
    return std::move(*d);
  }

  /// GET of `path`: the object, or the error naming `what` (404 included).
  Result<json::Document> read(const std::string& path, const std::string& what) {
    Response resp = PLUMB_TRY(client_->request("GET", path));
    if (resp.status != 200) return std::unexpected(client_->http_error(what, "GET", path, resp));
    return object_of(resp, what + ": the answer");
  }

  Result<std::optional<PodInfo>> pod(const PodRef& ref) override {
    PLUMB_TRY(check_ns("pod", ref.namespace_));
    PLUMB_TRY(check_name("pod", ref.name));
    const std::string what = "read pod " + ref.namespace_ + "/" + ref.name;
    // A cached pod of another UID may be the old pod of that name (the watch has not told its
    // deletion yet): the API server decides then, as without the cache.
    auto hit = cached(Watched::kPod, ref.namespace_, ref.name,
                      [&](const json::Document& d) { return ref.uid.empty() || meta_string(d, "uid") == ref.uid; });
    json::Document d = hit ? std::move(*hit) : PLUMB_TRY(read(pod_path(ref.namespace_, ref.name), what));
    PodInfo info;
    info.annotations = annotations_of(d);
    info.uid = meta_string(d, "uid");
    info.resource_version = meta_string(d, "resourceVersion");
    auto src = info.annotations.find(std::string(kConfigSource));
    info.is_static = src != info.annotations.end() && src->second != "api";
    known_[ref.namespace_ + "/" + ref.name] = {info.uid, info.resource_version, info.is_static};
    return std::optional<PodInfo>(std::move(info));
  }

  Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string& ns, const std::string& name) override {
    PLUMB_TRY(check_ns("NetworkAttachmentDefinition", ns));
    if (!nad::is_dns1123_label(name)) {
      return fail(cni_code::kInvalidConfig,
                  "NetworkAttachmentDefinition name \"" + name + "\" is not a valid DNS-1123 label");
    }
    const std::string what = "read NetworkAttachmentDefinition " + ns + "/" + name;
    auto hit = cached(Watched::kNad, ns, name);
    json::Document d = hit ? std::move(*hit) : PLUMB_TRY(read(nad_path(ns, name), what));
    nad::NetworkAttachmentDefinition out;
    out.name = meta_string(d, "name");
    out.namespace_ = meta_string(d, "namespace");
    if (out.name != name || (out.namespace_ != ns && !out.namespace_.empty())) {
      return fail(cni_code::kDecode, what + ": the API server answered with object " + out.namespace_ + "/" + out.name);
    }
    out.namespace_ = ns;
    out.annotations = annotations_of(d);
    if (const json::Value* spec = json::find(d, "spec")) {
      auto cfg = PLUMB_TRY(json::get_string(*spec, "config", what + ": spec"));
      if (cfg) out.config = *cfg;
    }
    return out;
  }

  Status write_network_status(const PodRef& ref, const std::string& status_json, const std::string& owner) override {
    PLUMB_TRY(write_status(ref, status_json, owner, nullptr));
    return {};
  }

  Result<bool> write_network_status_if(const PodRef& ref, const std::string& status_json, const std::string& owner,
                                       const std::function<bool()>& current) override {
    return write_status(ref, status_json, owner, &current);
  }

  bool posts_events() const override { return true; }
  bool status_is_remote() const override { return true; }

  Status remove_network_status(const PodRef&, const std::string&) override { return {}; }

  Result<std::optional<IpamClaim>> ipam_claim(const std::string& ns, const std::string& name) override {
    PLUMB_TRY(check_ns("IPAMClaim", ns));
    PLUMB_TRY(check_name("IPAMClaim", name));
    const std::string what = "read IPAMClaim " + ns + "/" + name;
    const std::string path = claim_path(ns, name);
    // Only a cached claim whose addresses are already written: one without may be older than
    // the status.ips another sandbox's ADD wrote a moment ago.
    auto hit = cached(Watched::kClaim, ns, name, [](const json::Document& d) {
      const json::Value* status = json::find(d, "status");
      const json::Value* ips = status != nullptr && status->IsObject() ? json::find(*status, "ips") : nullptr;
      return ips != nullptr && ips->IsArray() && !ips->Empty();
    });
    if (!hit) {
      Response resp = PLUMB_TRY(client_->request("GET", path));
      if (resp.status == 404) return std::optional<IpamClaim>{};
      if (resp.status != 200) return std::unexpected(client_->http_error(what, "GET", path, resp));
      hit = PLUMB_TRY(object_of(resp, what + ": the answer"));
    }
    json::Document& d = *hit;
    IpamClaim c;
    c.namespace_ = ns;
    c.name = name;
    if (const json::Value* spec = PLUMB_TRY(json::get_object(d, "spec", what))) {
      c.network = PLUMB_TRY(json::get_string(*spec, "network", what + ": spec")).value_or("");
      c.interface = PLUMB_TRY(json::get_string(*spec, "interface", what + ": spec")).value_or("");
    }
    if (const json::Value* status = PLUMB_TRY(json::get_object(d, "status", what))) {
      c.ips = PLUMB_TRY(json::get_string_array(*status, "ips", what + ": status")).value_or(std::vector<std::string>{});
    }
    claim_rv_[ns + "/" + name] = meta_string(d, "resourceVersion");
    return std::optional<IpamClaim>(std::move(c));
  }

  Status write_ipam_claim_status(const std::string& ns, const std::string& name, const IpamClaimStatus& written) override {
    PLUMB_TRY(check_ns("IPAMClaim", ns));
    PLUMB_TRY(check_name("IPAMClaim", name));
    const std::string key = ns + "/" + name;
    const std::string what = "write status.ips of IPAMClaim " + key;
    const std::string path = claim_path(ns, name) + "/status";
    for (int i = 0;; ++i) {
      json::Document patch(rapidjson::kObjectType);
      auto& a = patch.GetAllocator();
      if (auto it = claim_rv_.find(key); it != claim_rv_.end() && !it->second.empty()) {
        json::Value meta(rapidjson::kObjectType);
        json::set_string(meta, "resourceVersion", it->second, a);
        json::set(patch, "metadata", std::move(meta), a);
      }
      json::Value status;
      status.CopyFrom(ipam_claim_status_json(written), a);
      json::set(patch, "status", std::move(status), a);
      Response resp = PLUMB_TRY(client_->request("PATCH", path, json::dump(patch), kMergePatch));
      if (resp.status == 200 || resp.status == 201) return {};
      if (resp.status != 409 || i >= kConflictRetries)
        return std::unexpected(client_->http_error(what, "PATCH", path, resp));
      auto again = PLUMB_TRY(ipam_claim(ns, name));
      if (!again) return fail(cni_code::kNotFound, what + ": the claim was deleted meanwhile");
      if (!again->ips.empty()) {
        if (again->ips == written.ips) return {};
        std::string theirs;
        for (auto& s : again->ips) theirs += (theirs.empty() ? "" : ",") + s;
        return fail(cni_code::kConflict, what + ": another writer set status.ips to " + theirs + " meanwhile");
      }
    }
  }

  Status post_events(const PodRef& ref, const std::vector<PodEvent>& events, const std::string& instance) override {
    if (events.empty() || ref.name.empty()) return {};
    PLUMB_TRY(check_ns("pod", ref.namespace_));
    const std::string path = "/apis/events.k8s.io/v1/namespaces/" + ref.namespace_ + "/events";
    std::string uid = ref.uid;
    if (auto it = known_.find(ref.namespace_ + "/" + ref.name); it != known_.end() && !it->second.uid.empty())
      uid = it->second.uid;
    Status first;
    for (size_t i = 0; i < events.size(); ++i) {
      const std::string body = json::dump(event_json(ref, uid, events[i], instance, i));
      auto resp = client_->request("POST", path, body, k8s::kJson);
      Status st = !resp ? Status(std::unexpected(resp.error()))
                  : resp->status == 201 || resp->status == 200
                      ? Status{}
                      : Status(std::unexpected(client_->http_error(
                            "post Event " + events[i].reason + " on pod " + ref.namespace_ + "/" + ref.name, "POST",
                            path, *resp)));
      if (!st && first) first = st;
    }
    return first;
  }

  Status ready() override {
    const std::string path =
        "/apis/k8s.cni.cncf.io/v1/namespaces/" + probe_ns_ + "/network-attachment-definitions?limit=1";
    auto resp = client_->request("GET", path, {}, {}, 0);
    if (!resp) {
      Error e = resp.error();
      e.cni_code = e.cni_code == cni_code::kTryAgainLater ? cni_code::kPluginNotReady : cni_code::kPluginNotAvailable;
      e.msg = "plumb cannot serve ADD: " + e.msg;
      return std::unexpected(e);
    }
    if (resp->status == 200) return {};
    Error e = client_->http_error("plumb cannot serve ADD: list NetworkAttachmentDefinitions", "GET", path, *resp);
    e.cni_code = http::transient_status(resp->status) ? cni_code::kPluginNotReady : cni_code::kPluginNotAvailable;
    return std::unexpected(e);
  }

 private:
  struct Known {
    std::string uid;
    std::string rv;
    bool is_static = false;
  };

  /// The network-status PATCH (write_network_status); with `current` (write_network_status_if)
  /// the pod is read first when its resourceVersion is not known, `current` is asked after each
  /// read and before each PATCH, and false is returned once it says no.
  Result<bool> write_status(const PodRef& ref, const std::string& status_json, const std::string& owner,
                            const std::function<bool()>* current) {
    PLUMB_TRY(check_ns("pod", ref.namespace_));
    PLUMB_TRY(check_name("pod", ref.name));
    const std::string key = ref.namespace_ + "/" + ref.name;
    const std::string what = "write network-status of pod " + key;
    const std::string path = pod_path(ref.namespace_, ref.name) + "/status";
    // Preconditions: the UID (never write into another pod of the same name) and, when the pod
    // was read in this invocation, its resourceVersion (a 409 makes us re-read and retry).
    Known k;
    bool read = false;  // the pod was read in this invocation: its UID is the object's own
    if (auto it = known_.find(key); it != known_.end()) {
      k = it->second;
      read = true;
    }
    if (k.uid.empty()) k.uid = ref.uid;
    bool reread = current != nullptr && k.rv.empty();  // a write after the answer needs a precondition
    for (int i = 0;; ++i) {
      if (reread) {
        auto info = pod(ref);
        if (!info) return std::unexpected(info.error().within(what + (i == 0 ? "" : " after a conflict")));
        if (!ref.uid.empty() && (*info)->uid != ref.uid && !(*info)->is_static) {
          return fail(cni_code::kConflict, what + ": the pod was replaced (API server UID " + (*info)->uid +
                                               ", K8S_POD_UID " + ref.uid + "); network-status not written");
        }
        k.uid = (*info)->uid;
        k.rv = (*info)->resource_version;
        read = true;
      }
      if (current != nullptr && !(*current)()) return false;
      json::Document patch(rapidjson::kObjectType);
      auto& a = patch.GetAllocator();
      json::Value meta(rapidjson::kObjectType);
      if (!k.uid.empty()) json::set_string(meta, "uid", k.uid, a);
      if (!k.rv.empty()) json::set_string(meta, "resourceVersion", k.rv, a);
      json::Value ann(rapidjson::kObjectType);
      json::set_string(ann, nad::kNetworkStatusAnnotation, status_json, a);
      // The sandbox these networks belong to, in the same write: the reconciler tells an older
      // sandbox's leftover allocations from the current one's by it.
      if (!owner.empty()) json::set_string(ann, kSandboxAnnotation, owner, a);
      json::set(meta, "annotations", std::move(ann), a);
      json::set(patch, "metadata", std::move(meta), a);
      Response resp = PLUMB_TRY(client_->request("PATCH", path, json::dump(patch), kMergePatch));
      if (resp.status == 200 || resp.status == 201) {
        if (auto d = object_of(resp, what); d) known_[key].rv = meta_string(*d, "resourceVersion");
        return true;
      }
      // Conflict: someone else changed the pod, or the UID precondition failed (409; an API
      // server may also answer 422 "uid: field is immutable" to a UID taken from K8S_POD_UID,
      // e.g. for a static pod's mirror). Re-read and retry.
      bool retry = resp.status == 409 || (resp.status == 422 && !read);
      if (!retry || i >= kConflictRetries) return std::unexpected(client_->http_error(what, "PATCH", path, resp));
      reread = true;
    }
  }
  std::shared_ptr<k8s::Client> client_;  // shared with later sources when kept (k8s::keep_clients)
  std::string probe_ns_;
  std::map<std::string, Known> known_;           // pods read in this invocation
  std::map<std::string, std::string> claim_rv_;  // resourceVersion of claims read
};

}  // namespace

std::unique_ptr<PodSource> make_kube_source(Credentials creds, Options opts, std::string probe_namespace) {
  return std::make_unique<KubeSource>(std::move(creds), opts, std::move(probe_namespace));
}

}  // namespace plumb::source::kube
