// What `plumb install` writes (see node_config.hpp).
#include "cni-entry/install/node_config.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/base/json.hpp"
#include "engine/base/text.hpp"
#include "engine/base/yaml.hpp"
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
    for (std::string_view own : {"type", "clusterNetwork", "kubeconfig", "capabilities", "nodeName"}) {
      if (key == own) {
        return fail(cni_code::kInvalidConfig, "--plugin-config sets \"" + std::string(key) +
                                                  "\", which plumb install writes itself (from the node's primary "
                                                  "CNI config, service account and NODE_NAME)");
      }
    }
    json::set(entry, key, json::Value(it->value, a), a);
  }
  return {};
}

}  // namespace

Result<std::optional<std::string>> primary_config(const std::string& conf_dir, const std::string& name,
                                                  const std::string& renamed) {
  std::vector<std::string> names = PLUMB_TRY(list_dir(conf_dir));
  std::sort(names.begin(), names.end());
  auto present = [&names](const std::string& n) { return std::binary_search(names.begin(), names.end(), n); };
  std::optional<std::string> live;
  if (!name.empty()) {
    if (present(name)) live = name;
  } else {
    for (const auto& n : names) {
      if (n == kConflistName || n.front() == '.') continue;
      if (ends_with(n, ".conf") || ends_with(n, ".conflist") || ends_with(n, ".json")) {
        live = n;
        break;
      }
    }
  }
  const std::string old = renamed + std::string(kRenamedSuffix);
  const bool renamed_counts = !renamed.empty() && present(old) && (name.empty() || name == renamed);
  if (renamed_counts && (!live || renamed < *live)) return std::optional<std::string>(old);
  return live;
}

std::optional<std::string> renamed_primary(const std::string& conf_dir) {
  auto text = read_file(conf_dir + "/" + std::string(kConflistName), "plumb's conflist");
  if (!text) return std::nullopt;
  auto doc = json::parse(*text, "plumb's conflist");
  if (!doc || !doc->IsObject()) return std::nullopt;
  const json::Value* plugins = json::find(*doc, "plugins");
  if (plugins == nullptr || !plugins->IsArray() || plugins->Empty() || !(*plugins)[0].IsObject()) return std::nullopt;
  const json::Value* cluster = json::find((*plugins)[0], "clusterNetwork");
  if (cluster == nullptr || !cluster->IsString()) return std::nullopt;
  std::string base = cluster->GetString();
  base = base.substr(base.rfind('/') + 1);  // the whole string when it has no '/'
  if (!ends_with(base, kRenamedSuffix) || base.size() == kRenamedSuffix.size()) return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(conf_dir + "/" + base, ec)) return std::nullopt;
  return base.substr(0, base.size() - kRenamedSuffix.size());
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

Result<std::string> render_kubeconfig(const ServiceAccount& sa) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  // One {"name": name, inner_key: inner} entry of a kubeconfig list, as the list.
  auto entry = [&a](std::string_view name, std::string_view inner_key, json::Value inner) {
    json::Value e(rapidjson::kObjectType);
    json::set_string(e, "name", name, a);
    json::set(e, inner_key, std::move(inner), a);
    json::Value list(rapidjson::kArrayType);
    list.PushBack(std::move(e), a);
    return list;
  };
  json::Value cluster(rapidjson::kObjectType);
  json::set_string(cluster, "server", sa.server, a);
  json::set_string(cluster, "certificate-authority-data", base64::encode(sa.ca_pem), a);
  json::Value user(rapidjson::kObjectType);
  json::set_string(user, "token", sa.token, a);
  json::Value context(rapidjson::kObjectType);
  json::set_string(context, "cluster", "local", a);
  json::set_string(context, "user", "plumb", a);
  json::set_string(d, "apiVersion", "v1", a);
  json::set_string(d, "kind", "Config", a);
  json::set(d, "clusters", entry("local", "cluster", std::move(cluster)), a);
  json::set(d, "users", entry("plumb", "user", std::move(user)), a);
  json::set(d, "contexts", entry("plumb", "context", std::move(context)), a);
  json::set_string(d, "current-context", "plumb", a);
  return yaml::dump(d);
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
  if (!in.cni_version.empty() && *version != in.cni_version) {
    return fail(cni_code::kInvalidConfig,
                "--cni-version \"" + in.cni_version + "\" differs from " + where + "'s cniVersion \"" + *version + "\"");
  }
  std::map<std::string, bool> caps = PLUMB_TRY(primary_capabilities(primary, where));
  caps["io.kubernetes.cri.pod-annotations"] = true;  // plumb reads the selection from it: no pod GET

  json::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  json::Value entry(rapidjson::kObjectType);
  json::set_string(entry, "type", in.plugin_type, a);
  json::set_string(entry, "clusterNetwork", in.primary_path, a);
  if (!in.kubeconfig_path.empty()) json::set_string(entry, "kubeconfig", in.kubeconfig_path, a);
  json::Value cap_obj(rapidjson::kObjectType);
  for (const auto& [k, v] : caps) json::set(cap_obj, k, json::Value(v), a);
  json::set(entry, "capabilities", std::move(cap_obj), a);
  if (!in.node_name.empty()) json::set_string(entry, "nodeName", in.node_name, a);
  PLUMB_TRY(merge_plugin_config(in.plugin_config, entry, a));

  json::set_string(out, "cniVersion", *version, a);
  json::set_string(out, "name", "plumb", a);
  json::Value plugins(rapidjson::kArrayType);
  plugins.PushBack(std::move(entry), a);
  json::set(out, "plugins", std::move(plugins), a);
  return json::dump(out) + "\n";
}

}  // namespace plumb::install
