// From a NetworkAttachmentDefinition (or an on-disk file) to a runnable config list: spec 3.4.1
// resolution order, 3.4.2 name injection, 7.1 cniVersion/name injection into every plugin, and
// CNI 1.1.0 "cniVersions".
#include "engine/base/file.hpp"
#include "engine/base/file_memo.hpp"
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>

#include "cni-entry/npwg/nad.hpp"

namespace plumb::nad {
namespace {

namespace fs = std::filesystem;
using json::Value;


std::string ext_of(const fs::path& p) { return p.extension().string(); }

/// Regular files (symlinks followed) in `dir` whose extension is in `exts`, sorted by name.
/// Errors: kNotFound when `dir` cannot be listed.
Result<std::vector<fs::path>> config_files(const std::string& dir, std::initializer_list<std::string_view> exts) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return fail(cni_code::kNotFound, "cannot list CNI config directory " + dir + ": " + ec.message());
  std::vector<fs::path> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return fail(cni_code::kIo, "cannot list CNI config directory " + dir + ": " + ec.message());
    std::error_code sec;
    if (!fs::is_regular_file(it->path(), sec)) continue;
    std::string ext = ext_of(it->path());
    if (std::find(exts.begin(), exts.end(), ext) != exts.end()) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  return out;
}

void join_names(std::string& out, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
}

}  // namespace

namespace {

/// `doc` (a config or a conflist) as a conflist: a list is checked (non-empty "plugins", each an
/// object with a "type") and copied; a single config becomes a one-plugin list (libcni
/// ConfListFromConf). Errors: kInvalidConfig naming `origin` and the offending key.
Result<json::Document> as_conflist(const json::Document& doc, const std::string& origin) {
  json::Document list;
  auto& a = list.GetAllocator();
  list.SetObject();
  if (const Value* plugins = json::find(doc, "plugins")) {
    if (!plugins->IsArray() || plugins->Empty()) {
      return fail(cni_code::kInvalidConfig, origin + ": \"plugins\" must be a non-empty list, got " + json::quote(*plugins));
    }
    for (rapidjson::SizeType i = 0; i < plugins->Size(); ++i) {
      const Value& p = (*plugins)[i];
      const std::string where = origin + ": plugins[" + std::to_string(i) + "]";
      if (!p.IsObject()) return fail(cni_code::kInvalidConfig, where + " must be an object, got " + json::quote(p));
      const Value* type = json::find(p, "type");
      if (type == nullptr || !type->IsString() || type->GetStringLength() == 0) {
        return fail(cni_code::kInvalidConfig, where + " has no \"type\"");
      }
    }
    list.CopyFrom(doc, a);
    return list;
  }
  const Value* type = json::find(doc, "type");
  if (type == nullptr) return fail(cni_code::kInvalidConfig, origin + ": CNI config has neither \"plugins\" nor \"type\"");
  if (!type->IsString() || type->GetStringLength() == 0) {
    return fail(cni_code::kInvalidConfig, origin + ": \"type\" must be a non-empty string, got " + json::quote(*type));
  }
  for (const char* key : {"cniVersion", "cniVersions", "name"}) {
    if (const Value* v = json::find(doc, key)) json::set(list, key, Value(*v, a), a);
  }
  Value single(rapidjson::kArrayType);
  single.PushBack(Value(doc, a), a);
  json::set(list, "plugins", std::move(single), a);
  return list;
}

/// The version the list runs in: the highest supported entry of "cniVersions", else
/// "cniVersion" (empty or absent: 0.1.0, as libcni). Errors: kIncompatibleVersion naming it.
Result<std::string> pick_version(const json::Document& list, const std::string& origin) {
  auto version = json::get_string(list, "cniVersion", "config");
  if (!version) return std::unexpected(version.error().within(origin));
  std::string picked = version->value_or("");
  if (picked.empty()) picked = "0.1.0";
  auto versions = json::get_string_array(list, "cniVersions", "config");
  if (!versions) return std::unexpected(versions.error().within(origin));
  if (*versions) {
    // libcni: the top-level cniVersion belongs to the set the highest supported is picked from.
    std::string best = cni::version_supported(picked) && !version->value_or("").empty() ? picked : std::string();
    for (const auto& v : **versions) {
      if (cni::version_supported(v) && (best.empty() || cni::compare_versions(v, best) > 0)) best = v;
    }
    if (!best.empty()) picked = best;
  }
  if (!cni::version_supported(picked)) {
    std::string supported;
    join_names(supported, cni::supported_versions());
    return fail(cni_code::kIncompatibleVersion,
                origin + ": cniVersion \"" + picked + "\" is not supported (supported: " + supported + ")");
  }
  return picked;
}

/// A list-level boolean as libcni reads it: true/false, or the strings "true"/"false" (any case).
Result<bool> list_bool(const json::Document& list, const char* key, const std::string& origin) {
  const Value* v = json::find(list, key);
  if (v == nullptr) return false;
  if (v->IsBool()) return v->GetBool();
  if (v->IsString()) {
    std::string s(v->GetString(), v->GetStringLength());
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (s == "true" || s == "false") return s == "true";
  }
  return fail(cni_code::kInvalidConfig, origin + ": \"" + key + "\" " + json::quote(*v) + " must be true or false");
}

/// Appends to `list` (a conflist object) the plugin drop-ins of `dir` (CNI spec 1.1
/// configuration format, libcni NetworkPluginConfsFromFiles): every *.conf file, in lexical
/// order, one plugin config each (an object with a "type"); "plugins" is made when absent. A
/// missing directory has none. Returns how many were appended.
/// Errors: kInvalidConfig naming a drop-in that is not a plugin config; kDecode for bad JSON.
Result<size_t> append_dropins(json::Document& list, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return size_t{0};
  const auto files = PLUMB_TRY(config_files(dir, {".conf"}));
  if (files.empty()) return size_t{0};
  auto& a = list.GetAllocator();
  if (json::find(list, "plugins") == nullptr) json::set(list, "plugins", Value(rapidjson::kArrayType), a);
  Value& plugins = list["plugins"];
  if (!plugins.IsArray()) return size_t{0};  // normalize names the bad "plugins"
  for (const auto& f : files) {
    const std::string body = PLUMB_TRY(read_file(f.string(), "CNI plugin config"));
    auto plugin = PLUMB_TRY(json::parse(body, f.string()));
    const Value* type = plugin.IsObject() ? json::find(plugin, "type") : nullptr;
    if (type == nullptr || !type->IsString() || type->GetStringLength() == 0) {
      return fail(cni_code::kInvalidConfig, f.string() + ": a plugin drop-in must be a JSON object with a \"type\"");
    }
    plugins.PushBack(Value(plugin, a), a);
  }
  return files.size();
}

/// A .conflist file's text with its plugin drop-ins (libcni NetworkConfFromFile): unless
/// "loadOnlyInlinedPlugins" is true, those of "<directory of path>/<network name>/" are appended
/// (append_dropins), and "plugins" may be absent. `appended` gets their number. Other files, and
/// texts that are not objects (normalize reports those), are returned unchanged.
/// Errors: kInvalidConfig naming the file: loadOnlyInlinedPlugins without "plugins", a list with
/// no plugin at all; append_dropins'.
Result<std::string> with_dropins(std::string_view text, const std::string& path, size_t& appended) {
  appended = 0;
  if (ext_of(path) != ".conflist") return std::string(text);
  auto doc = json::parse(text, "CNI config from " + path);
  if (!doc || !doc->IsObject()) return std::string(text);
  const bool inlined_only = PLUMB_TRY(list_bool(*doc, "loadOnlyInlinedPlugins", path));
  const bool has_plugins = json::find(*doc, "plugins") != nullptr;
  if (inlined_only && !has_plugins) {
    return fail(cni_code::kInvalidConfig, path + ": \"loadOnlyInlinedPlugins\" is true and there is no \"plugins\" list");
  }
  const Value* name = json::find(*doc, "name");
  if (inlined_only || name == nullptr || !name->IsString() || !cni::is_valid_network_name(name->GetString())) return std::string(text);
  const std::string dir = (fs::path(path).parent_path() / name->GetString()).string();
  appended = PLUMB_TRY(append_dropins(*doc, dir));
  if (appended == 0 && !has_plugins) {
    return fail(cni_code::kInvalidConfig, path + ": no plugin configs found (no \"plugins\" and no *.conf in " + dir + ")");
  }
  return appended == 0 ? std::string(text) : json::dump(*doc);
}

/// normalize() of a file's text, its plugin drop-ins appended (with_dropins).
Result<ResolvedNetwork> normalize_file(std::string_view text, const std::string& default_name, const std::string& path) {
  size_t appended = 0;
  std::string full = PLUMB_TRY(with_dropins(text, path, appended));
  ResolvedNetwork net = PLUMB_TRY(normalize(full, default_name, path));
  net.dropin_plugins = appended;
  return net;
}

}  // namespace

Result<ResolvedNetwork> normalize(std::string_view config_json, const std::string& default_name, const std::string& origin) {
  auto doc = PLUMB_TRY(json::parse(config_json, "CNI config from " + origin));
  if (!doc.IsObject()) return fail(cni_code::kInvalidConfig, origin + ": CNI config must be a JSON object");
  json::Document list = PLUMB_TRY(as_conflist(doc, origin));
  auto& a = list.GetAllocator();

  ResolvedNetwork net;
  net.origin = origin;
  auto name = json::get_string(list, "name", "config");
  if (!name) return std::unexpected(name.error().within(origin));
  net.name = name->value_or("");
  if (net.name.empty()) {
    if (default_name.empty()) return fail(cni_code::kInvalidConfig, origin + ": CNI config has no \"name\"");
    net.name = default_name;  // spec 3.4.2
  }
  // The name becomes paths (host-local's dataDir/<name>): refused here, where it enters, with the
  // CNI spec's rule, so nothing recorded can fail the same check at DEL.
  if (!cni::is_valid_network_name(net.name)) {
    return fail(cni_code::kInvalidConfig, origin + ": network \"name\" \"" + net.name.substr(0, 80) +
                                              "\" is invalid: it must start with a letter or digit, then letters, digits, '_', '.' or '-'");
  }
  net.cni_version = PLUMB_TRY(pick_version(list, origin));
  net.disable_check = PLUMB_TRY(list_bool(list, "disableCheck", origin));
  net.disable_gc = PLUMB_TRY(list_bool(list, "disableGC", origin));

  for (auto& p : list["plugins"].GetArray()) {  // spec 7.1
    json::set_string(p, "cniVersion", net.cni_version, a);
    json::set_string(p, "name", net.name, a);
  }
  // The list itself: cniVersion and name first, then everything else in its original order.
  net.conflist.SetObject();
  auto& out_alloc = net.conflist.GetAllocator();
  json::set_string(net.conflist, "cniVersion", net.cni_version, out_alloc);
  json::set_string(net.conflist, "name", net.name, out_alloc);
  for (auto it = list.MemberBegin(); it != list.MemberEnd(); ++it) {
    std::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (key == "cniVersion" || key == "name") continue;
    json::set(net.conflist, key, Value(it->value, out_alloc), out_alloc);
  }
  return net;
}

namespace {

/// Spec 3.4.1's three rules (resolve() without the annotations).
Result<ResolvedNetwork> resolve_config(const NetworkAttachmentDefinition& nad, const std::string& conf_dir) {
  const std::string who = nad.namespace_ + "/" + nad.name;
  if (!nad.config.empty()) return normalize(nad.config, nad.name, "NAD " + who);  // 3.4.1 rule 1

  std::vector<std::string> skipped;
  auto files = config_files(conf_dir, {".conflist", ".conf", ".json"});
  if (files) {
    // Rule 2: *.conflist first; rule 3: *.conf (and *.json, which libcni treats alike).
    for (bool lists : {true, false}) {
      for (const auto& path : *files) {
        if ((ext_of(path) == ".conflist") != lists) continue;
        auto text = read_file(path.string(), "CNI config");
        if (!text) {
          skipped.push_back(path.filename().string());
          continue;
        }
        auto doc = json::parse(*text, path.string());
        if (!doc || !doc->IsObject()) {
          skipped.push_back(path.filename().string());
          continue;
        }
        const Value* name = json::find(*doc, "name");
        if (name == nullptr || !name->IsString() || std::string_view(name->GetString(), name->GetStringLength()) != nad.name) {
          continue;
        }
        return normalize_file(*text, nad.name, path.string());
      }
    }
  }
  std::string details;
  if (!files) {
    details = files.error().msg;
  } else if (!skipped.empty()) {
    details = "unreadable or invalid files skipped: ";
    join_names(details, skipped);
  }
  return fail(cni_code::kNotFound,
              "NetworkAttachmentDefinition " + who + " has no spec.config and no CNI config named \"" + nad.name +
                  "\" in " + conf_dir,
              details);
}

}  // namespace

Result<ResolvedNetwork> resolve(const NetworkAttachmentDefinition& nad, const std::string& conf_dir) {
  ResolvedNetwork net = PLUMB_TRY(resolve_config(nad, conf_dir));
  if (auto rn = nad.annotations.find(std::string(kResourceNameAnnotation)); rn != nad.annotations.end()) {
    net.resource_name = rn->second;
  }
  return net;
}

Result<ResolvedNetwork> load_file_or_dir(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(cni_code::kNotFound, "CNI config " + path + " not found");
  std::string file = path;
  const bool dir = S_ISDIR(st.st_mode);
  if (dir) {
    auto files = PLUMB_TRY(config_files(path, {".conf", ".conflist", ".json"}));
    if (files.empty()) return fail(cni_code::kNotFound, "no CNI config file (*.conf, *.conflist, *.json) in " + path);
    file = files.front().string();
  }
  // Kept across the invocations a daemon worker serves while the file does not change (the
  // cluster's default network is read at every ADD).
  static FileMemo<ResolvedNetwork> memo;
  // A file named by `path` itself: its stat() just taken is the one the memo compares.
  auto kept = memo.get(
      file, "CNI config",
      [](const std::string& text, const std::string& origin) { return normalize_file(text, "", origin); },
      dir ? nullptr : &st);
  if (!kept) {
    Error e = kept.error();
    if (e.sys_errno == ENOENT) e.cni_code = cni_code::kNotFound;
    return std::unexpected(e);
  }
  const ResolvedNetwork& net = **kept;
  // Drop-ins change without the list's file changing: a list that has (or may now have) them is
  // read whole every time.
  std::error_code dir_ec;
  if (net.dropin_plugins > 0 || (ext_of(file) == ".conflist" && fs::is_directory(fs::path(file).parent_path() / net.name, dir_ec))) {
    const std::string text = PLUMB_TRY(read_file(file, "CNI config"));
    return normalize_file(text, "", file);
  }
  ResolvedNetwork out{net.name,        net.cni_version,   json::clone(net.conflist), net.origin,
                      net.resource_name, net.disable_check, net.disable_gc,            net.dropin_plugins};
  return out;
}

Result<std::optional<ResolvedNetwork>> auxiliary_chain(const std::string& name, const std::string& cni_version,
                                                       const std::string& conf_dir) {
  if (!cni::is_valid_network_name(name)) {
    return fail(cni_code::kInvalidConfig, "auxiliaryCNIChainName \"" + name + "\" is not a valid network name");
  }
  json::Document list(rapidjson::kObjectType);
  auto& a = list.GetAllocator();
  json::set_string(list, "cniVersion", cni_version, a);
  json::set_string(list, "name", name, a);
  Value plugins(rapidjson::kArrayType);
  Value passthru(rapidjson::kObjectType);
  json::set_string(passthru, "type", "passthru", a);
  json::set_string(passthru, "name", "passthru-cni", a);
  plugins.PushBack(passthru, a);
  json::set(list, "plugins", std::move(plugins), a);
  const std::string dir = (fs::path(conf_dir) / name).string();
  if (PLUMB_TRY(append_dropins(list, dir)) == 0) return std::optional<ResolvedNetwork>{};
  return std::optional<ResolvedNetwork>(PLUMB_TRY(normalize(json::dump(list), name, "auxiliary CNI chain " + dir)));
}

}  // namespace plumb::nad
