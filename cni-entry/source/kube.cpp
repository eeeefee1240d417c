// The Kubernetes API server as a PodSource (see kube.hpp): kubeconfig / in-cluster credentials,
// the API requests on engine/base/http (timeouts, retries, backoff), and the reads and writes
// plumb needs.
#include "cni-entry/source/kube.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/base/http.hpp"
#include "engine/base/json.hpp"
#include "engine/base/yaml_guard.hpp"
#include "engine/base/text.hpp"
#include "cni-entry/npwg/nad.hpp"

namespace plumb::source::kube {
namespace {

constexpr std::string_view kMergePatch = "application/merge-patch+json";
constexpr std::string_view kConfigSource = "kubernetes.io/config.source";
/// Writes retried after a 409 (each after re-reading the object).
constexpr int kConflictRetries = 5;

/// Reads a whole (small) file; errors: kIo naming the path.
Result<std::string> read_whole(const std::string& path, std::string_view what) {
  auto text = read_file(path, what);
  if (!text) {
    Error e = text.error();
    e.cni_code = cni_code::kIo;  // a credential file that cannot be read, missing or not
    return std::unexpected(e);
  }
  return text;
}

/// A kubeconfig *-data field: base64 (line breaks allowed) of something non-empty.
Result<std::string> base64_decode(std::string_view in, const std::string& field) {
  auto out = base64::decode(in, field);
  if (!out) return fail(cni_code::kInvalidConfig, field + " is not valid base64", out.error().msg);
  if (out->empty()) return fail(cni_code::kInvalidConfig, field + " is empty");
  return out;
}

// ---- kubeconfig ----

/// True if `n` exists (yaml-cpp throws on type queries of missing nodes).
bool has(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

/// A named entry of a kubeconfig list (clusters/contexts/users): its inner map.
Result<YAML::Node> named(const YAML::Node& doc, const char* list, const char* inner, const std::string& name,
                         const std::string& where) {
  const YAML::Node l = doc[list];
  if (!has(l))
    return fail(cni_code::kInvalidConfig, where + ": no \"" + list + "\" list (looking for \"" + name + "\")");
  if (!l.IsSequence()) return fail(cni_code::kInvalidConfig, where + ": \"" + list + "\" is not a list");
  for (const auto& e : l) {
    if (!has(e) || !e.IsMap() || !has(e["name"]) || !e["name"].IsScalar() || e["name"].Scalar() != name) continue;
    const YAML::Node in = e[inner];
    if (!has(in) || !in.IsMap())
      return fail(cni_code::kInvalidConfig,
                  where + ": " + list + " entry \"" + name + "\" has no \"" + inner + "\" map");
    return in;
  }
  return fail(cni_code::kInvalidConfig, where + ": " + list + " has no entry named \"" + name + "\"");
}

std::string scalar(const YAML::Node& m, const char* key) {
  const YAML::Node v = m[key];
  return has(v) && v.IsScalar() ? v.Scalar() : std::string();
}

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  return base_dir + "/" + p;
}

}  // namespace

Result<Credentials> load_kubeconfig(const std::string& path) {
  const std::string where = "kubeconfig " + path;
  std::string text = PLUMB_TRY(read_whole(path, "kubeconfig"));
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  Credentials c;
  PLUMB_TRY(yaml::check(text, where));  // libyaml first: yaml-cpp hangs on some malformed input
  try {
    const YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap()) return fail(cni_code::kInvalidConfig, where + " is not a YAML map");
    std::string ctx_name = scalar(doc, "current-context");
    if (ctx_name.empty()) {
      const YAML::Node ctxs = doc["contexts"];
      if (has(ctxs) && ctxs.IsSequence() && ctxs.size() == 1 && has(ctxs[0]) && ctxs[0].IsMap() &&
          has(ctxs[0]["name"]) && ctxs[0]["name"].IsScalar()) {
        ctx_name = ctxs[0]["name"].Scalar();
      } else {
        return fail(cni_code::kInvalidConfig,
                    where + ": current-context is not set and there is not exactly one context");
      }
    }
    YAML::Node ctx = PLUMB_TRY(named(doc, "contexts", "context", ctx_name, where));
    std::string cluster_name = scalar(ctx, "cluster");
    std::string user_name = scalar(ctx, "user");
    if (cluster_name.empty())
      return fail(cni_code::kInvalidConfig, where + ": context \"" + ctx_name + "\" names no cluster");
    YAML::Node cluster = PLUMB_TRY(named(doc, "clusters", "cluster", cluster_name, where));
    c.server = scalar(cluster, "server");
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
      return fail(cni_code::kInvalidConfig, where + ": cluster \"" + cluster_name + "\" server \"" + c.server +
                                                "\" must be an https:// (or http://) URL");
    }
    c.ca_file = resolve_path(dir, scalar(cluster, "certificate-authority"));
    if (auto d = scalar(cluster, "certificate-authority-data"); !d.empty()) {
      c.ca_pem = PLUMB_TRY(base64_decode(d, where + ": cluster \"" + cluster_name + "\" certificate-authority-data"));
    }
    if (const YAML::Node v = cluster["insecure-skip-tls-verify"]; has(v) && v.IsScalar())
      c.insecure_skip_tls_verify = v.as<bool>();
    if (!user_name.empty()) {
      YAML::Node user = PLUMB_TRY(named(doc, "users", "user", user_name, where));
      const std::string uw = where + ": user \"" + user_name + "\"";
      for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
        if (has(user[unsupported])) {
          return fail(cni_code::kInvalidConfig,
                      uw + " uses \"" + unsupported +
                          "\", which plumb does not support (use token, tokenFile or a client certificate)");
        }
      }
      c.token = std::string(text::trim(scalar(user, "token")));
      c.token_file = resolve_path(dir, scalar(user, "tokenFile"));
      c.client_cert_file = resolve_path(dir, scalar(user, "client-certificate"));
      c.client_key_file = resolve_path(dir, scalar(user, "client-key"));
      if (auto d = scalar(user, "client-certificate-data"); !d.empty()) {
        c.client_cert_pem = PLUMB_TRY(base64_decode(d, uw + " client-certificate-data"));
      }
      if (auto d = scalar(user, "client-key-data"); !d.empty()) {
        c.client_key_pem = PLUMB_TRY(base64_decode(d, uw + " client-key-data"));
      }
      bool cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
      bool key = !c.client_key_file.empty() || !c.client_key_pem.empty();
      if (cert != key) {
        return fail(cni_code::kInvalidConfig,
                    uw + " has a client " + (cert ? "certificate without its key" : "key without its certificate"));
      }
    }
    c.origin = where + " (context " + ctx_name + ")";
  } catch (const YAML::Exception& ex) {
    std::string pos = ex.mark.is_null()
                          ? std::string{}
                          : ":" + std::to_string(ex.mark.line + 1) + ":" + std::to_string(ex.mark.column + 1);
    return fail(cni_code::kDecode, "cannot decode " + where + pos + ": " + ex.msg);
  }
  return c;
}

Result<Credentials> in_cluster(const std::string& host, const std::string& port, const std::string& sa_dir) {
  if (host.empty()) return fail(cni_code::kInvalidConfig, "in-cluster configuration: KUBERNETES_SERVICE_HOST is empty");
  if (port.empty() || !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      port.size() > 5) {
    return fail(cni_code::kInvalidConfig,
                "in-cluster configuration: KUBERNETES_SERVICE_PORT \"" + port + "\" is not a port number");
  }
  Credentials c;
  c.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  c.ca_file = sa_dir + "/ca.crt";
  c.token_file = sa_dir + "/token";
  c.origin = "in-cluster service account " + sa_dir;
  return c;
}

// ---- the API client ----

namespace {

using http::Response;

/// The HTTP client options of an API server: its TLS settings, the per-attempt timeout and
/// the retry policy of Options (retries after the first attempt, backoff doubling to the cap).
http::Options http_options(const Credentials& creds, const Options& opts) {
  http::Options o;
  o.tls.ca_file = creds.ca_file;
  o.tls.ca_pem = creds.ca_pem;
  o.tls.cert_file = creds.client_cert_file;
  o.tls.cert_pem = creds.client_cert_pem;
  o.tls.key_file = creds.client_key_file;
  o.tls.key_pem = creds.client_key_pem;
  o.tls.insecure_skip_verify = creds.insecure_skip_tls_verify;
  o.timeout = opts.timeout;
  o.retry.max_attempts = opts.retries + 1;
  o.retry.backoff = opts.backoff;
  o.retry.backoff_max = opts.backoff_max;
  o.peer = "the API server";
  return o;
}

/// Requests to one API server with its credentials: one HTTP client (connections are reused
/// within an invocation), the bearer token re-read from its file for every request.
class ApiClient {
 public:
  ApiClient(Credentials creds, Options opts) : creds_(std::move(creds)), http_(http_options(creds_, opts)) {}

  /// Sends `method path` (path starts with '/', query included) with an optional JSON body
  /// (`content_type`, e.g. "application/merge-patch+json"), retried as http::Client::request
  /// does (`retries` -1: Options::retries); any HTTP status that is not retried, or still
  /// transient after the last retry, is returned as a Response. Errors: kTryAgainLater naming
  /// method, URL and curl's reason when the server stays unreachable; kInvalidConfig for TLS
  /// set-up/verification failures and an unreadable or empty token file (naming it).
  Result<Response> request(std::string_view method, const std::string& path, const std::string& body = {},
                           std::string_view content_type = {}, int retries = -1) {
    http::Request req;
    req.method = method;
    req.url = creds_.server + path;
    req.body = body;
    req.content_type = content_type;
    const std::string what = req.method + " " + req.url;
    std::string token = creds_.token;
    if (!creds_.token_file.empty()) {
      // Re-read on every request: service-account tokens are rotated under our feet.
      auto t = read_whole(creds_.token_file, "token file");
      if (!t)
        return fail(cni_code::kInvalidConfig, what + ": cannot read the bearer token (" + creds_.origin + ")",
                    t.error().text());
      token = std::string(text::trim(*t));
      if (token.empty()) return fail(cni_code::kInvalidConfig, what + ": token file " + creds_.token_file + " is empty");
    }
    if (token.find_first_of("\r\n") != std::string::npos)
      return fail(cni_code::kInvalidConfig, what + ": the bearer token contains a line break (" + creds_.origin + ")");
    req.headers.push_back("Accept: application/json");
    if (!token.empty()) req.headers.push_back("Authorization: Bearer " + token);
    http::RetryPolicy policy = http_.options().retry;
    if (retries >= 0) policy.max_attempts = retries + 1;
    auto resp = http_.request(req, policy);
    if (!resp && resp.error().cni_code == cni_code::kInvalidConfig) resp.error().msg += " (" + creds_.origin + ")";
    return resp;
  }

  /// The error for an unexpected HTTP answer: 401/403 kInvalidConfig (credentials rejected /
  /// not authorised), 404 kNotFound, 409 kConflict, 429/5xx kTryAgainLater, else kIo; the msg
  /// names `what`, method, URL, status and the API server's own message.
  Error http_error(std::string_view what, std::string_view method, const std::string& path,
                   const Response& resp) const {
    std::string message;
    if (auto d = json::parse(resp.body, "API server answer"); d && d->IsObject()) {
      if (auto m = json::get_string(*d, "message", "Status"); m && *m) message = **m;
    }
    if (message.empty()) message = resp.body.substr(0, 200);
    unsigned code = cni_code::kIo;
    if (resp.status == 401 || resp.status == 403) code = cni_code::kInvalidConfig;
    if (resp.status == 404) code = cni_code::kNotFound;
    if (resp.status == 409) code = cni_code::kConflict;
    if (http::transient_status(resp.status)) code = cni_code::kTryAgainLater;
    std::string status = "HTTP " + std::to_string(resp.status);
    if (auto p = http::reason_phrase(resp.status); !p.empty()) status += " " + std::string(p);
    std::string msg = std::string(what) + ": " + std::string(method) + " " + creds_.server + path + ": " + status;
    if (resp.status == 401) msg += " (the API server rejected the credentials of " + creds_.origin + ")";
    if (resp.status == 403) msg += " (" + creds_.origin + " is not authorised)";
    return Error{code, 0, msg, message};
  }

  const Credentials& credentials() const { return creds_; }

 private:
  Credentials creds_;
  http::Client http_;
};

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

/// metadata of an object answer (an object), or a kDecode error naming `what`.
Result<json::Document> object_of(const Response& resp, const std::string& what) {
  auto d = json::parse(resp.body, what);
  if (!d) return std::unexpected(d.error());
  if (!d->IsObject()) return fail(cni_code::kDecode, what + " is not a JSON object");
  return std::move(*d);
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

std::string meta_string(const json::Value& obj, std::string_view key) {
  const json::Value* meta = json::find(obj, "metadata");
  const json::Value* v = meta != nullptr ? json::find(*meta, key) : nullptr;
  return v != nullptr && v->IsString() ? std::string(v->GetString()) : std::string();
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

  Status write_network_status(const PodRef& ref, const std::string& status_json, const std::string& /*owner*/) override {
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

  Status write_ipam_claim_ips(const std::string& ns, const std::string& name,
                              const std::vector<std::string>& ips) override {
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
      json::Value arr(rapidjson::kArrayType);
      for (auto& ip : ips) arr.PushBack(json::Value(ip.c_str(), a), a);
      json::Value status(rapidjson::kObjectType);
      json::set(status, "ips", std::move(arr), a);
      json::set(patch, "status", std::move(status), a);
      Response resp = PLUMB_TRY(client_.request("PATCH", path, json::dump(patch), kMergePatch));
      if (resp.status == 200 || resp.status == 201) return {};
      if (resp.status != 409 || i >= kConflictRetries)
        return std::unexpected(client_.http_error(what, "PATCH", path, resp));
      auto again = PLUMB_TRY(ipam_claim(ns, name));
      if (!again) return fail(cni_code::kNotFound, what + ": the claim was deleted meanwhile");
      if (!again->ips.empty()) {
        if (again->ips == ips) return {};
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
  ApiClient client_;
  std::string probe_ns_;
  std::map<std::string, Known> known_;           // pods read in this invocation
  std::map<std::string, std::string> claim_rv_;  // resourceVersion of claims read
};

}  // namespace

std::unique_ptr<PodSource> make_kube_source(Credentials creds, Options opts, std::string probe_namespace) {
  return std::make_unique<KubeSource>(std::move(creds), opts, std::move(probe_namespace));
}

}  // namespace plumb::source::kube
