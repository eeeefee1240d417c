// The Kubernetes API server as a PodSource (see kube.hpp): the reads and writes plumb needs, on
// the API client of engine/k8s (credentials, timeouts, retries, backoff).
#include "cni-entry/source/kube.hpp"

#include <algorithm>
#include <map>

#include "engine/base/json.hpp"
#include "engine/k8s/client.hpp"
#include "cni-entry/npwg/nad.hpp"

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

class KubeSource final : public PodSource {
 public:
  KubeSource(Credentials creds, Options opts, std::string probe_ns)
      : client_(std::move(creds), opts), probe_ns_(std::move(probe_ns)) {}

  std::string describe() const override {
    return "API server " + client_.credentials().server + " (" + client_.credentials().origin + ")";
  }

  Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const PodRef& ref) override {
    auto info = PLUMB_TRY(pod(ref));
    if (!info) return std::optional<std::map<std::string, std::string>>{};
    return std::optional<std::map<std::string, std::string>>(std::move(info->annotations));
  }

  Result<std::optional<PodInfo>> pod(const PodRef& ref) override {
    PLUMB_TRY(check_ns("pod", ref.namespace_));
    PLUMB_TRY(check_name("pod", ref.name));
    const std::string what = "read pod " + ref.namespace_ + "/" + ref.name;
    const std::string path = pod_path(ref.namespace_, ref.name);
    Response resp = PLUMB_TRY(client_.request("GET", path));
    if (resp.status != 200) return std::unexpected(client_.http_error(what, "GET", path, resp));
    json::Document d = PLUMB_TRY(object_of(resp, what + ": the answer"));
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
    const std::string path = nad_path(ns, name);
    Response resp = PLUMB_TRY(client_.request("GET", path));
    if (resp.status != 200) return std::unexpected(client_.http_error(what, "GET", path, resp));
    json::Document d = PLUMB_TRY(object_of(resp, what + ": the answer"));
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
    for (int i = 0;; ++i) {
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
      Response resp = PLUMB_TRY(client_.request("PATCH", path, json::dump(patch), kMergePatch));
      if (resp.status == 200 || resp.status == 201) {
        if (auto d = object_of(resp, what); d) known_[key].rv = meta_string(*d, "resourceVersion");
        return {};
      }
      // Conflict: someone else changed the pod, or the UID precondition failed (409; an API
      // server may also answer 422 "uid: field is immutable" to a UID taken from K8S_POD_UID,
      // e.g. for a static pod's mirror). Re-read and retry.
      bool retry = resp.status == 409 || (resp.status == 422 && !read);
      if (!retry || i >= kConflictRetries) return std::unexpected(client_.http_error(what, "PATCH", path, resp));
      auto info = pod(ref);
      if (!info) return std::unexpected(info.error().within(what + " after a conflict"));
      if (!ref.uid.empty() && (*info)->uid != ref.uid && !(*info)->is_static) {
        return fail(cni_code::kConflict, what + ": the pod was replaced (API server UID " + (*info)->uid +
                                             ", K8S_POD_UID " + ref.uid + "); network-status not written");
      }
      k.uid = (*info)->uid;
      k.rv = (*info)->resource_version;
      read = true;
    }
  }

  Status remove_network_status(const PodRef&, const std::string&) override { return {}; }

  Result<std::optional<IpamClaim>> ipam_claim(const std::string& ns, const std::string& name) override {
    PLUMB_TRY(check_ns("IPAMClaim", ns));
    PLUMB_TRY(check_name("IPAMClaim", name));
    const std::string what = "read IPAMClaim " + ns + "/" + name;
    const std::string path = claim_path(ns, name);
    Response resp = PLUMB_TRY(client_.request("GET", path));
    if (resp.status == 404) return std::optional<IpamClaim>{};
    if (resp.status != 200) return std::unexpected(client_.http_error(what, "GET", path, resp));
    json::Document d = PLUMB_TRY(object_of(resp, what + ": the answer"));
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
      Response resp = PLUMB_TRY(client_.request("PATCH", path, json::dump(patch), kMergePatch));
      if (resp.status == 200 || resp.status == 201) return {};
      if (resp.status != 409 || i >= kConflictRetries)
        return std::unexpected(client_.http_error(what, "PATCH", path, resp));
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

  Status ready() override {
    const std::string path =
        "/apis/k8s.cni.cncf.io/v1/namespaces/" + probe_ns_ + "/network-attachment-definitions?limit=1";
    auto resp = client_.request("GET", path, {}, {}, 0);
    if (!resp) {
      Error e = resp.error();
      e.cni_code = e.cni_code == cni_code::kTryAgainLater ? cni_code::kPluginNotReady : cni_code::kPluginNotAvailable;
      e.msg = "plumb cannot serve ADD: " + e.msg;
      return std::unexpected(e);
    }
    if (resp->status == 200) return {};
    Error e = client_.http_error("plumb cannot serve ADD: list NetworkAttachmentDefinitions", "GET", path, *resp);
    e.cni_code = http::transient_status(resp->status) ? cni_code::kPluginNotReady : cni_code::kPluginNotAvailable;
    return std::unexpected(e);
  }

 private:
  struct Known {
    std::string uid;
    std::string rv;
    bool is_static = false;
  };
  k8s::Client client_;
  std::string probe_ns_;
  std::map<std::string, Known> known_;           // pods read in this invocation
  std::map<std::string, std::string> claim_rv_;  // resourceVersion of claims read
};

}  // namespace

std::unique_ptr<PodSource> make_kube_source(Credentials creds, Options opts, std::string probe_namespace) {
  return std::make_unique<KubeSource>(std::move(creds), opts, std::move(probe_namespace));
}

}  // namespace plumb::source::kube
