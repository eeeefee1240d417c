// What `plumb install` writes (see node_config.hpp).
#include "cni-entry/install/node_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <vector>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/base/json.hpp"
#include "engine/base/text.hpp"
#include "engine/cni/cni.hpp"
#include "cni-entry/source/kube.hpp"

namespace plumb::install {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Adds the boolean members of a "capabilities" object (if any) of `plugin` to `out`.
Status collect_capabilities(const json::Value& plugin, const std::string& where, std::map<std::string, bool>& out) {
  const json::Value* caps = PLUMB_TRY(json::get_object(plugin, "capabilities", where));
  if (caps == nullptr) return {};
  for (auto it = caps->MemberBegin(); it != caps->MemberEnd(); ++it) {
    const std::string key = it->name.GetString();
    if (!it->value.IsBool()) {
      return fail(cni_code::kInvalidConfig, where + ".capabilities." + key + " is not a boolean");
    }
    out[key] = out[key] || it->value.GetBool();
  }
  return {};
}

/// The capabilities a primary config declares: those of every plugin of a conflist, or of the
/// single plugin of a .conf (Multus's auto configuration reads both shapes the same way).
Result<std::map<std::string, bool>> primary_capabilities(const json::Value& primary, const std::string& where) {
  std::map<std::string, bool> caps;
  const json::Value* plugins = PLUMB_TRY(json::get_array(primary, "plugins", where));
  if (plugins == nullptr) {
    PLUMB_TRY(collect_capabilities(primary, where, caps));
    return caps;
  }
  for (rapidjson::SizeType i = 0; i < plugins->Size(); ++i) {
    const std::string pw = where + ".plugins[" + std::to_string(i) + "]";
    if (!(*plugins)[i].IsObject()) return fail(cni_code::kInvalidConfig, pw + " is not a JSON object");
    PLUMB_TRY(collect_capabilities((*plugins)[i], pw, caps));
  }
  return caps;
}

/// Copies the members of `plugin_config` (a JSON object) into `entry`, refusing the keys install
/// itself writes.
Status merge_plugin_config(const std::string& plugin_config, json::Value& entry, json::Document::AllocatorType& a) {
  if (plugin_config.empty()) return {};
  json::Document extra = PLUMB_TRY(json::parse(plugin_config, "--plugin-config"));
  if (!extra.IsObject()) return fail(cni_code::kInvalidConfig, "--plugin-config is not a JSON object");
  for (auto it = extra.MemberBegin(); it != extra.MemberEnd(); ++it) {
    const std::string_view key(it->name.GetString(), it->name.GetStringLength());
    for (std::string_view own : {"type", "clusterNetwork", "kubeconfig", "capabilities"}) {
      if (key == own) {
        return fail(cni_code::kInvalidConfig, "--plugin-config sets \"" + std::string(key) +
                                                  "\", which plumb install writes itself (from the node's primary "
                                                  "CNI config and service account)");
      }
    }
    json::set(entry, key, json::Value(it->value, a), a);
  }
  return {};
}

}  // namespace

Result<std::optional<std::string>> primary_config(const std::string& conf_dir) {
  std::vector<std::string> names = PLUMB_TRY(list_dir(conf_dir));
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (n == kConflistName || n.front() == '.') continue;
    if (ends_with(n, ".conf") || ends_with(n, ".conflist") || ends_with(n, ".json")) return std::optional<std::string>(n);
  }
  return std::optional<std::string>{};
}

Result<std::optional<ServiceAccount>> read_service_account(const std::string& host, const std::string& port,
                                                           const std::string& sa_dir) {
  if (host.empty()) return std::optional<ServiceAccount>{};
  const source::kube::Credentials creds = PLUMB_TRY(source::kube::in_cluster(host, port, sa_dir));
  ServiceAccount sa;
  sa.server = creds.server;
  sa.token = std::string(text::trim(PLUMB_TRY(read_file(creds.token_file, "service-account token", 1u << 20))));
  if (sa.token.empty()) return fail(cni_code::kInvalidConfig, "service-account token " + creds.token_file + " is empty");
  sa.ca_pem = PLUMB_TRY(read_file(creds.ca_file, "service-account CA", 1u << 20));
  return std::optional<ServiceAccount>(std::move(sa));
}

std::string render_kubeconfig(const ServiceAccount& sa) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "Config";
  out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "local";
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << sa.server;
  out << YAML::Key << "certificate-authority-data" << YAML::Value << base64::encode(sa.ca_pem);
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "plumb";
  out << YAML::Key << "user" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "token" << YAML::Value << YAML::DoubleQuoted << sa.token;
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "plumb";
  out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << "local";
  out << YAML::Key << "user" << YAML::Value << "plumb";
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "current-context" << YAML::Value << "plumb";
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Result<std::string> render_conflist(const ConflistInputs& in) {
  const std::string where = "primary CNI config " + in.primary_path;
  json::Document primary = PLUMB_TRY(json::parse(in.primary_text, where));
  if (!primary.IsObject()) return fail(cni_code::kInvalidConfig, where + " is not a JSON object");
  auto version = PLUMB_TRY(json::get_string(primary, "cniVersion", where));
  if (!version || !cni::version_supported(*version)) {
    return fail(cni_code::kInvalidConfig,
                where + ": cniVersion \"" + version.value_or("") + "\" is missing or not one plumb supports");
  }
  std::map<std::string, bool> caps = PLUMB_TRY(primary_capabilities(primary, where));
  caps["io.kubernetes.cri.pod-annotations"] = true;  // plumb reads the selection from it: no pod GET

  json::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  json::Value entry(rapidjson::kObjectType);
  json::set_string(entry, "type", "plumb", a);
  json::set_string(entry, "clusterNetwork", in.primary_path, a);
  if (!in.kubeconfig_path.empty()) json::set_string(entry, "kubeconfig", in.kubeconfig_path, a);
  json::Value cap_obj(rapidjson::kObjectType);
  for (const auto& [k, v] : caps) json::set(cap_obj, k, json::Value(v), a);
  json::set(entry, "capabilities", std::move(cap_obj), a);
  PLUMB_TRY(merge_plugin_config(in.plugin_config, entry, a));

  json::set_string(out, "cniVersion", *version, a);
  json::set_string(out, "name", "plumb", a);
  json::Value plugins(rapidjson::kArrayType);
  plugins.PushBack(std::move(entry), a);
  json::set(out, "plugins", std::move(plugins), a);
  return json::dump(out) + "\n";
}

}  // namespace plumb::install
