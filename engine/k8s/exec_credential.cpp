// Exec credential plugins (exec_credential.hpp).
#include "engine/k8s/exec_credential.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "engine/base/base64.hpp"
#include "engine/base/spawn.hpp"
#include "engine/base/text.hpp"

namespace plumb::k8s {
namespace {

constexpr std::string_view kV1 = "client.authentication.k8s.io/v1";
constexpr std::string_view kV1beta1 = "client.authentication.k8s.io/v1beta1";

/// The executable `command` names: itself when it has a '/', else the first PATH entry holding it.
Result<std::string> locate(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* path = std::getenv("PATH");
  for (auto dir : text::split(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + command;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return fail(cni_code::kInvalidConfig, "exec credential plugin \"" + command + "\" not found in PATH");
}

/// KUBERNETES_EXEC_INFO: the ExecCredential client-go hands the plugin (spec.interactive false).
std::string exec_info(const ExecConfig& cfg, const ExecCluster& cluster) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::set_string(d, "kind", "ExecCredential", a);
  json::set_string(d, "apiVersion", cfg.api_version, a);
  json::Value spec(rapidjson::kObjectType);
  json::set(spec, "interactive", json::Value(false), a);
  if (cfg.provide_cluster_info) {
    json::Value c(rapidjson::kObjectType);
    json::set_string(c, "server", cluster.server, a);
    if (!cluster.ca_pem.empty()) json::set_string(c, "certificate-authority-data", base64::encode(cluster.ca_pem), a);
    if (cluster.insecure_skip_tls_verify) json::set(c, "insecure-skip-tls-verify", json::Value(true), a);
    json::set(spec, "cluster", std::move(c), a);
  }
  json::set(d, "spec", std::move(spec), a);
  return json::dump(d);
}

/// This process's environment, then the config's env and KUBERNETES_EXEC_INFO, a later entry
/// replacing an earlier one of the same name (Go's exec.Cmd keeps the last).
std::vector<std::string> plugin_env(const ExecConfig& cfg, const ExecCluster& cluster) {
  std::vector<std::pair<std::string, std::string>> all;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) all.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  all.insert(all.end(), cfg.env.begin(), cfg.env.end());
  all.emplace_back("KUBERNETES_EXEC_INFO", exec_info(cfg, cluster));
  std::vector<std::string> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool replaced = std::any_of(all.begin() + static_cast<std::ptrdiff_t>(i) + 1, all.end(), [&](const auto& later) { return later.first == all[i].first; });
    if (!replaced) out.push_back(all[i].first + "=" + all[i].second);
  }
  return out;
}

/// An RFC 3339 time ("2026-01-02T03:04:05Z", fractions and offsets allowed) as a time_t.
std::optional<std::time_t> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  const char* rest = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  long offset = 0;
  if (*rest == '+' || *rest == '-') {
    int h = 0, m = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &h, &m) != 2) return std::nullopt;
    offset = (*rest == '+' ? 1 : -1) * (h * 3600L + m * 60L);
    rest += 6;
  } else if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else {
    return std::nullopt;
  }
  if (*rest != '\0') return std::nullopt;
  return ::timegm(&tm) - offset;
}

/// The plugin's stdout as a credential (client-go's checks).
Result<ExecCredential> decode(const std::string& out, const ExecConfig& cfg, const std::string& who) {
  auto doc = json::parse(out, who + " output");
  if (!doc || !doc->IsObject()) return fail(cni_code::kInvalidConfig, who + " did not print an ExecCredential JSON object");
  const std::string version = PLUMB_TRY(json::get_string(*doc, "apiVersion", who)).value_or("");
  const std::string kind = PLUMB_TRY(json::get_string(*doc, "kind", who)).value_or("");
  if (kind != "ExecCredential" || version != cfg.api_version) {
    return fail(cni_code::kInvalidConfig, who + " returned kind \"" + kind + "\" apiVersion \"" + version + "\", not an ExecCredential of " + cfg.api_version);
  }
  const json::Value* status = PLUMB_TRY(json::get_object(*doc, "status", who));
  if (status == nullptr) return fail(cni_code::kInvalidConfig, who + " returned no status");
  ExecCredential c;
  c.token = PLUMB_TRY(json::get_string(*status, "token", who + ".status")).value_or("");
  c.client_cert_pem = PLUMB_TRY(json::get_string(*status, "clientCertificateData", who + ".status")).value_or("");
  c.client_key_pem = PLUMB_TRY(json::get_string(*status, "clientKeyData", who + ".status")).value_or("");
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return fail(cni_code::kInvalidConfig, who + " returned a client certificate without its key, or a key without its certificate");
  }
  if (c.token.empty() && c.client_cert_pem.empty()) return fail(cni_code::kInvalidConfig, who + " returned neither a token nor a client certificate");
  if (auto exp = PLUMB_TRY(json::get_string(*status, "expirationTimestamp", who + ".status")); exp && !exp->empty()) {
    c.expires = parse_rfc3339(*exp);
    if (!c.expires) return fail(cni_code::kInvalidConfig, who + ".status.expirationTimestamp \"" + *exp + "\" is not an RFC 3339 time");
  }
  return c;
}

Result<ExecCredential> run_plugin(const ExecConfig& cfg, const ExecCluster& cluster) {
  const std::string who = "exec credential plugin " + cfg.command;
  process::SpawnRequest req;
  req.path = PLUMB_TRY(locate(cfg.command));
  req.argv = {cfg.command};
  req.argv.insert(req.argv.end(), cfg.args.begin(), cfg.args.end());
  req.env = plugin_env(cfg, cluster);
  req.timeout = std::chrono::seconds(60);
  auto o = process::run(req);
  if (!o) return fail(cni_code::kInvalidConfig, who + " could not be run", o.error().text());
  if (o->timed_out) return fail(cni_code::kInvalidConfig, who + " did not finish within 60 s and was killed");
  if (o->exit_code != 0) {
    return fail(cni_code::kInvalidConfig, who + " exited with status " + std::to_string(o->exit_code) + (o->signal != 0 ? " (signal " + std::to_string(o->signal) + ")" : "") +
                                              (text::trim(o->err).empty() ? "" : ": " + std::string(text::trim(o->err))));
  }
  return decode(o->out, cfg, who);
}

/// The cache key: everything that makes the plugin answer differently.
std::string cache_key(const ExecConfig& cfg, const ExecCluster& cluster) {
  std::string k = cfg.api_version + '\0' + cfg.command + '\0' + cluster.server + '\0';
  for (const auto& a : cfg.args) k += a + '\0';
  for (const auto& [n, v] : cfg.env) k += n + '=' + v + '\0';
  return k;
}

}  // namespace

Result<ExecConfig> parse_exec(const json::Value& exec, const std::string& dir, const std::string& where) {
  if (!exec.IsObject()) return fail(cni_code::kInvalidConfig, where + ": exec must be a map");
  ExecConfig c;
  c.api_version = PLUMB_TRY(json::get_string(exec, "apiVersion", where + ".exec")).value_or("");
  if (c.api_version != kV1 && c.api_version != kV1beta1) {
    return fail(cni_code::kInvalidConfig, where + ": exec.apiVersion \"" + c.api_version + "\" must be " + std::string(kV1) + " or " + std::string(kV1beta1));
  }
  c.command = PLUMB_TRY(json::get_string(exec, "command", where + ".exec")).value_or("");
  if (c.command.empty()) return fail(cni_code::kInvalidConfig, where + ": exec.command is missing");
  if (c.command.front() != '/' && c.command.find('/') != std::string::npos) c.command = dir + "/" + c.command;
  c.args = PLUMB_TRY(json::get_string_array(exec, "args", where + ".exec")).value_or(std::vector<std::string>{});
  if (const json::Value* env = PLUMB_TRY(json::get_array(exec, "env", where + ".exec"))) {
    for (const auto& e : env->GetArray()) {
      const json::Value* n = e.IsObject() ? json::find(e, "name") : nullptr;
      const json::Value* v = e.IsObject() ? json::find(e, "value") : nullptr;
      if (n == nullptr || !n->IsString() || n->GetStringLength() == 0 || std::string_view(n->GetString()).find('=') != std::string_view::npos ||
          (v != nullptr && !v->IsString())) {
        return fail(cni_code::kInvalidConfig, where + ": exec.env entry " + json::quote(e) + " must be {name, value}");
      }
      c.env.emplace_back(n->GetString(), v != nullptr ? v->GetString() : "");
    }
  }
  const std::string mode = PLUMB_TRY(json::get_string(exec, "interactiveMode", where + ".exec")).value_or("");
  if (mode.empty() && c.api_version == kV1) return fail(cni_code::kInvalidConfig, where + ": exec.interactiveMode must be set for " + std::string(kV1));
  if (mode == "Always") {
    return fail(cni_code::kInvalidConfig, where + ": exec.interactiveMode Always needs a terminal, which plumb never has (use Never or IfAvailable)");
  }
  if (!mode.empty() && mode != "Never" && mode != "IfAvailable") {
    return fail(cni_code::kInvalidConfig, where + ": exec.interactiveMode \"" + mode + "\" must be Never, IfAvailable or Always");
  }
  c.provide_cluster_info = PLUMB_TRY(json::get_bool(exec, "provideClusterInfo", where + ".exec")).value_or(false);
  return c;
}

Result<ExecCredential> exec_credential(const ExecConfig& cfg, const ExecCluster& cluster, bool refresh) {
  static std::map<std::string, ExecCredential> kept;  // per process: a daemon worker keeps it across invocations
  const std::string key = cache_key(cfg, cluster);
  if (auto it = kept.find(key); !refresh && it != kept.end()) {
    if (!it->second.expires || std::time(nullptr) < *it->second.expires) return it->second;
  }
  ExecCredential fresh = PLUMB_TRY(run_plugin(cfg, cluster));
  kept[key] = fresh;
  return fresh;
}

}  // namespace plumb::k8s
