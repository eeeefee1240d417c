// Kubernetes credentials: a kubeconfig file's current context, or the in-cluster service account
// (see client.hpp).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "engine/base/yaml_guard.hpp"
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
  std::string text = PLUMB_TRY(read_credential_file(path, "kubeconfig"));
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
    c.namespace_ = scalar(ctx, "namespace");
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
