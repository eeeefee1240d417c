// Kubernetes credentials: a kubeconfig file's current context, or the in-cluster service account
// (see client.hpp).
#include <algorithm>
#include <cstdlib>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "engine/base/yaml.hpp"
#include "engine/k8s/client.hpp"

namespace plumb::k8s {
namespace {

/// A kubeconfig *-data field: base64 (line breaks allowed) of something non-empty.
Result<std::string> base64_decode(std::string_view in, const std::string& field) {
  auto out = base64::decode(in, field);
  if (!out) return fail(cni_code::kInvalidConfig, field + " is not valid base64", out.error().msg);
  if (out->empty()) return fail(cni_code::kInvalidConfig, field + " is empty");
  return out;
}


/// A named entry of a kubeconfig list (clusters/contexts/users): its inner map.
Result<const json::Value*> named(const json::Value& doc, const char* list, const char* inner, const std::string& name,
                                 const std::string& where) {
  const json::Value* l = json::find(doc, list);
  if (l == nullptr)
    return fail(cni_code::kInvalidConfig, where + ": no \"" + list + "\" list (looking for \"" + name + "\")");
  if (!l->IsArray()) return fail(cni_code::kInvalidConfig, where + ": \"" + list + "\" is not a list");
  for (const auto& e : l->GetArray()) {
    const json::Value* n = json::find(e, "name");
    if (n == nullptr || !n->IsString() || std::string_view(n->GetString(), n->GetStringLength()) != name) continue;
    const json::Value* in = json::find(e, inner);
    if (in == nullptr || !in->IsObject())
      return fail(cni_code::kInvalidConfig,
                  where + ": " + list + " entry \"" + name + "\" has no \"" + inner + "\" map");
    return in;
  }
  return fail(cni_code::kInvalidConfig, where + ": " + list + " has no entry named \"" + name + "\"");
}

/// The scalar `m[key]` as client-go reads it into a string field: a string, or a number or boolean
/// as its text (sigs.k8s.io/yaml converts those for a string target); "" when absent or null.
/// Errors: kInvalidConfig naming `where`, the key and the value when it is a map or a list.
Result<std::string> string_of(const json::Value& m, const char* key, const std::string& where) {
  const json::Value* v = json::find(m, key);
  if (v == nullptr) return std::string();
  if (v->IsString()) return std::string(v->GetString(), v->GetStringLength());
  if (v->IsNumber() || v->IsBool()) return json::dump(*v);
  return fail(cni_code::kInvalidConfig, where + ": " + key + " must be a string, got " + json::quote(*v));
}

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  return base_dir + "/" + p;
}

/// The user's credentials into `c`.
Status read_user(const json::Value& user, const std::string& dir, const std::string& uw, Credentials& c) {
  for (const char* unsupported : {"auth-provider", "username", "password"}) {
    if (json::find(user, unsupported) != nullptr) {
      return fail(cni_code::kInvalidConfig,
                  uw + " uses \"" + unsupported +
                      "\", which plumb does not support (use token, tokenFile, exec or a client certificate)");
    }
  }
  if (const json::Value* exec = json::find(user, "exec"); exec != nullptr && !exec->IsNull()) c.exec = PLUMB_TRY(parse_exec(*exec, dir, uw));
  c.token = std::string(text::trim(PLUMB_TRY(string_of(user, "token", uw))));
  c.token_file = resolve_path(dir, PLUMB_TRY(string_of(user, "tokenFile", uw)));
  c.client_cert_file = resolve_path(dir, PLUMB_TRY(string_of(user, "client-certificate", uw)));
  c.client_key_file = resolve_path(dir, PLUMB_TRY(string_of(user, "client-key", uw)));
  if (auto d = PLUMB_TRY(string_of(user, "client-certificate-data", uw)); !d.empty()) {
    c.client_cert_pem = PLUMB_TRY(base64_decode(d, uw + " client-certificate-data"));
  }
  if (auto d = PLUMB_TRY(string_of(user, "client-key-data", uw)); !d.empty()) {
    c.client_key_pem = PLUMB_TRY(base64_decode(d, uw + " client-key-data"));
  }
  bool cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
  bool key = !c.client_key_file.empty() || !c.client_key_pem.empty();
  if (cert != key) {
    return fail(cni_code::kInvalidConfig,
                uw + " has a client " + (cert ? "certificate without its key" : "key without its certificate"));
  }
  return {};
}

/// The cluster's server and CA into `c`.
Status read_cluster(const json::Value& cluster, const std::string& dir, const std::string& cw, Credentials& c) {
  c.server = PLUMB_TRY(string_of(cluster, "server", cw));
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
    return fail(cni_code::kInvalidConfig, cw + " server \"" + c.server + "\" must be an https:// (or http://) URL");
  }
  c.ca_file = resolve_path(dir, PLUMB_TRY(string_of(cluster, "certificate-authority", cw)));
  if (auto d = PLUMB_TRY(string_of(cluster, "certificate-authority-data", cw)); !d.empty()) {
    c.ca_pem = PLUMB_TRY(base64_decode(d, cw + " certificate-authority-data"));
  }
  c.insecure_skip_tls_verify = PLUMB_TRY(json::get_bool(cluster, "insecure-skip-tls-verify", cw)).value_or(false);
  return {};
}

/// The context to use: current-context, else the only context.
Result<std::string> context_name(const json::Value& doc, const std::string& where) {
  std::string name = PLUMB_TRY(string_of(doc, "current-context", where));
  if (!name.empty()) return name;
  const json::Value* ctxs = json::find(doc, "contexts");
  const json::Value* only = ctxs != nullptr && ctxs->IsArray() && ctxs->Size() == 1 ? json::find((*ctxs)[0], "name") : nullptr;
  if (only == nullptr || !only->IsString()) {
    return fail(cni_code::kInvalidConfig, where + ": current-context is not set and there is not exactly one context");
  }
  return std::string(only->GetString(), only->GetStringLength());
}

}  // namespace

Result<Credentials> load_kubeconfig(const std::string& path) {
  const std::string where = "kubeconfig " + path;
  std::string text = PLUMB_TRY(read_credential_file(path, "kubeconfig"));
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  Credentials c;
  const json::Document doc = PLUMB_TRY(yaml::load(text, where));
  if (!doc.IsObject()) return fail(cni_code::kInvalidConfig, where + " is not a YAML map");
  const std::string ctx_name = PLUMB_TRY(context_name(doc, where));
  const json::Value& ctx = *PLUMB_TRY(named(doc, "contexts", "context", ctx_name, where));
  const std::string xw = where + ": context \"" + ctx_name + "\"";
  c.namespace_ = PLUMB_TRY(string_of(ctx, "namespace", xw));
  const std::string cluster_name = PLUMB_TRY(string_of(ctx, "cluster", xw));
  const std::string user_name = PLUMB_TRY(string_of(ctx, "user", xw));
  if (cluster_name.empty()) return fail(cni_code::kInvalidConfig, xw + " names no cluster");
  const json::Value& cluster = *PLUMB_TRY(named(doc, "clusters", "cluster", cluster_name, where));
  PLUMB_TRY(read_cluster(cluster, dir, where + ": cluster \"" + cluster_name + "\"", c));
  if (!user_name.empty()) {
    const json::Value& user = *PLUMB_TRY(named(doc, "users", "user", user_name, where));
    PLUMB_TRY(read_user(user, dir, where + ": user \"" + user_name + "\"", c));
  }
  c.origin = where + " (context " + ctx_name + ")";
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
  // The pod's own namespace, as client-go's in-cluster configuration reads it (optional).
  if (auto ns = read_file(sa_dir + "/namespace", "service-account namespace")) c.namespace_ = std::string(text::trim(*ns));
  c.origin = "in-cluster service account " + sa_dir;
  return c;
}

Result<std::optional<Credentials>> configured(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) {
    auto creds = load_kubeconfig(kubeconfig);
    if (!creds) return std::unexpected(creds.error());
    return std::optional<Credentials>(std::move(*creds));
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host != nullptr && *host != '\0') {
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    auto creds = PLUMB_TRY(in_cluster(host, port != nullptr && *port != '\0' ? port : "443"));
    return std::optional<Credentials>(std::move(creds));
  }
  return std::optional<Credentials>{};
}

}  // namespace plumb::k8s
