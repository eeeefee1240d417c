// Adopting a node from Multus (multus_adopt.hpp): DEL and GC of the sandboxes Multus attached.
#include "cni-entry/pod/multus_adopt.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/base/base64.hpp"
#include "engine/base/file.hpp"
#include "engine/cni/delegate.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod::multus {
namespace {

std::string string_member(const json::Value& v, std::string_view key) {
  const json::Value* m = json::find(v, key);
  return m != nullptr && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : std::string();
}

/// The capability args a non-first delegate adds to the runtime's (Multus's
/// mergeCNIRuntimeConfig; port mappings and bandwidth are not in the cache: json:"-").
json::Document element_requests(const json::Value& d) {
  json::Document r(rapidjson::kObjectType);
  auto& a = r.GetAllocator();
  if (const json::Value* ips = json::find(d, "ipRequest"); ips != nullptr && ips->IsArray() && !ips->Empty()) {
    json::set(r, "ips", json::Value(*ips, a), a);
  }
  static constexpr std::pair<const char*, const char*> kRequests[] = {
      {"macRequest", "mac"}, {"infinibandGUIDRequest", "infinibandGUID"}, {"deviceID", "deviceID"}};
  for (auto [from, to] : kRequests) {
    if (std::string v = string_member(d, from); !v.empty()) json::set_string(r, to, v, a);
  }
  return r;
}

Result<Delegate> read_delegate(const json::Value& d, size_t index, const std::string& where,
                               const std::string& master_ifname, const std::string& cni_version) {
  if (!d.IsObject()) return fail(cni_code::kDecode, where + " is not an object");
  Delegate out;
  out.name = string_member(d, "Name");
  const std::string bytes = string_member(d, "Bytes");
  if (bytes.empty()) return fail(cni_code::kDecode, where + ".Bytes (the delegate's config) is missing");
  const std::string text = PLUMB_TRY(base64::decode(bytes, where + ".Bytes"));
  out.config = PLUMB_TRY(json::parse(text, where + ".Bytes"));
  if (!out.config.IsObject()) return fail(cni_code::kDecode, where + ".Bytes is not a CNI config object");
  const json::Value* list = json::find(d, "ConfList");
  const json::Value* plugins = list != nullptr && list->IsObject() ? json::find(*list, "plugins") : nullptr;
  out.conflist = plugins != nullptr && plugins->IsArray() && !plugins->Empty();
  if (out.conflist) {
    const json::Value* p = json::find(out.config, "plugins");
    if (p == nullptr || !p->IsArray())
      return fail(cni_code::kDecode, where + ".Bytes is a conflist without \"plugins\"");
    if (string_member(out.config, "cniVersion").empty() && !cni_version.empty()) {
      json::set_string(out.config, "cniVersion", cni_version, out.config.GetAllocator());
    }
  }
  const std::string requested = string_member(d, "ifnameRequest");
  out.ifname = !requested.empty() ? requested : index == 0 ? master_ifname : "net" + std::to_string(index);
  if (index > 0)
    out.requests = element_requests(d);
  else
    out.requests.SetObject();
  out.device_id = string_member(d, "deviceID");
  return out;
}

/// libcni's injectRuntimeConfig: the capability args the plugin declares, as its runtimeConfig.
void inject_runtime_config(json::Document& plugin, const json::Value& caps) {
  const json::Value* declared = json::find(plugin, "capabilities");
  if (declared == nullptr || !declared->IsObject()) return;
  auto& a = plugin.GetAllocator();
  json::Value rc(rapidjson::kObjectType);
  for (const auto& m : declared->GetObject()) {
    if (!m.value.IsBool() || !m.value.GetBool()) continue;
    if (const json::Value* v = json::find(caps, m.name.GetString()); v != nullptr) {
      rc.AddMember(json::Value(m.name, a), json::Value(*v, a), a);
    }
  }
  if (rc.MemberCount() > 0) json::set(plugin, "runtimeConfig", std::move(rc), a);
}

/// libcni's getCachedResult: the result cached for the delegate, in the chain's version; nullopt
/// when there is none or it cannot be read (libcni then runs DEL without prevResult).
std::optional<cni::CniResult> cached_result(const std::string& path, const std::string& version, Log& log) {
  auto text = read_file(path, "libcni's cached result");
  if (!text) return std::nullopt;
  auto doc = json::parse(*text, path);
  const json::Value* raw =
      doc && doc->IsObject() && string_member(*doc, "kind") == "cniCacheV1" ? json::find(*doc, "result") : nullptr;
  if (raw == nullptr || !raw->IsObject()) {
    log.warning(path + " holds no cniCacheV1 result: DEL runs without prevResult");
    return std::nullopt;
  }
  std::string v = string_member(*raw, "cniVersion");
  auto r = cni::decode_result(*raw, cni::version_supported(v) ? v : version);
  if (!r) {
    log.warning(r.error().within(path).text() + ": DEL runs without prevResult");
    return std::nullopt;
  }
  return std::move(*r);
}

void remove_file(const std::string& path, Log& log) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    log.warning("cannot remove " + path + ": " + std::strerror(errno));
}

/// One delegate's DEL as Multus's DelegateDel through libcni (DelNetworkList / DelNetwork).
Status del_one(const PlumbConfig& conf, const std::string& dir, const cni::PluginSearch& search, const Sandbox& sb,
               const Delegate& d, size_t index, Log& log) {
  json::Document caps(rapidjson::kObjectType);
  if (sb.runtime_config.IsObject()) caps = json::clone(sb.runtime_config);
  for (const auto& m : d.requests.GetObject())
    json::set(caps, m.name.GetString(), json::Value(m.value, caps.GetAllocator()), caps.GetAllocator());
  std::string devinfo_file;
  if (std::string id = string_member(caps, "deviceID"); !id.empty()) {
    std::string base = d.name + "-" + sb.container_id + "_" + d.ifname;  // Multus's delegateRuntimeConfig
    std::replace(base.begin(), base.end(), '/', '-');
    devinfo_file = conf.device_info_dir + "/cni/" + base;
    json::set_string(caps, devinfo::kCapability, devinfo_file, caps.GetAllocator());
  }
  const std::string name = string_member(d.config, "name");
  const std::string version = string_member(d.config, "cniVersion");
  const std::string where =
      "Multus's delegate " + (name.empty() ? std::to_string(index) : name) + " (" + d.ifname + ")";
  if (!is_path_component(name))
    return fail(cni_code::kDecode, where + ": network name \"" + name + "\" is not a file name");
  const std::string result_file = dir + "/results/" + name + "-" + sb.container_id + "-" + d.ifname;
  std::optional<cni::CniResult> prev;
  if (cni::version_supported(version) && cni::compare_versions(version, "0.4.0") >= 0)
    prev = cached_result(result_file, version, log);
  const json::Value* list = d.conflist ? json::find(d.config, "plugins") : nullptr;
  const rapidjson::SizeType n = list != nullptr ? list->Size() : 1;
  Status st;
  for (rapidjson::SizeType i = n; i-- > 0 && st;) {
    const json::Value& plugin = list != nullptr ? (*list)[i] : static_cast<const json::Value&>(d.config);
    const std::string type = string_member(plugin, "type");
    st = [&]() -> Status {
      json::Document one = PLUMB_TRY(cni::with_prev_result(plugin, prev ? &*prev : nullptr, version));
      json::set_string(one, "name", name, one.GetAllocator());
      json::set_string(one, "cniVersion", version, one.GetAllocator());
      inject_runtime_config(one, caps);
      const std::string binary = PLUMB_TRY(cni::find_plugin(type, search));
      PLUMB_TRY(cni::exec_plugin(type, binary, cni::Invocation{"DEL", sb.container_id, sb.netns, d.ifname, sb.cni_args},
                                 json::dump(one), search));
      return {};
    }();
    if (!st) st = std::unexpected(st.error().within(where + ": plugin " + type));
  }
  if (st) remove_file(result_file, log);                      // libcni's cacheDel, after the whole chain's DEL
  if (!devinfo_file.empty()) remove_file(devinfo_file, log);  // Multus's CleanDeviceInfoForCNI, whatever the outcome
  return st;
}

/// One entry of libcni's result cache.
struct CachedAttachment {
  std::string container_id, network, ifname, netns, cni_args;
  json::Document capability_args;
};

/// Every readable cniCacheV1 file of <dir>/results (Multus's gatherValidAttachmentsFromCache
/// reads the same), unreadable ones skipped.
std::vector<CachedAttachment> cached_attachments(const std::string& dir) {
  std::vector<CachedAttachment> out;
  auto names = list_dir(dir + "/results");
  if (!names) return out;
  for (const auto& n : *names) {
    auto text = read_file(dir + "/results/" + n, "libcni's cached result");
    auto doc = text ? json::parse(*text, n) : Result<json::Document>(std::unexpected(text.error()));
    if (!doc || !doc->IsObject() || string_member(*doc, "kind") != "cniCacheV1") continue;
    CachedAttachment c{string_member(*doc, "containerId"),
                       string_member(*doc, "networkName"),
                       string_member(*doc, "ifName"),
                       string_member(*doc, "netns"),
                       {},
                       json::Document(rapidjson::kObjectType)};
    if (const json::Value* args = json::find(*doc, "cniArgs"); args != nullptr && args->IsArray()) {
      for (const auto& kv : args->GetArray()) {
        if (!kv.IsArray() || kv.Size() != 2 || !kv[0].IsString() || !kv[1].IsString()) continue;
        c.cni_args += (c.cni_args.empty() ? "" : ";") + std::string(kv[0].GetString()) + "=" + kv[1].GetString();
      }
    }
    if (const json::Value* caps = json::find(*doc, "capabilityArgs"); caps != nullptr && caps->IsObject())
      c.capability_args = json::clone(*caps);
    out.push_back(std::move(c));
  }
  return out;
}

/// Tears one cached sandbox down and removes Multus's cache file once every delegate's DEL
/// succeeded. `what` names the verb for the log.
Status adopt(const PlumbConfig& conf, const std::string& cni_path, const Sandbox& sb,
             const std::vector<Delegate>& delegates, const std::string& what, Log& log) {
  Errors errors;
  del_delegates(conf, conf.multus_cache_dir, cni_path, sb, delegates, log, errors);
  if (!errors.empty()) {
    log.error(what + " of container " + sb.container_id + " from Multus's cache: " + errors.status().error().text() +
              " (Multus's cache kept for the next DEL)");
    return errors.status();
  }
  remove_file(conf.multus_cache_dir + "/" + sb.container_id, log);
  log.info(what + " of container " + sb.container_id + ": the " + std::to_string(delegates.size()) +
           " attachments Multus made torn down from its cache");
  return {};
}

}  // namespace

Result<std::optional<std::vector<Delegate>>> read_delegates(const std::string& dir, const std::string& container_id,
                                                            const std::string& master_ifname,
                                                            const std::string& cni_version) {
  const std::string path = dir + "/" + container_id;
  auto text = read_file(path, "Multus's delegate cache");
  if (!text) {
    if (text.error().cni_code == cni_code::kNotFound) return std::optional<std::vector<Delegate>>{};
    return std::unexpected(text.error());
  }
  json::Document doc = PLUMB_TRY(json::parse(*text, path));
  if (!doc.IsArray() || doc.Empty())
    return fail(cni_code::kDecode, path + " is not Multus's list of delegates (a JSON array)");
  std::vector<Delegate> out;
  for (rapidjson::SizeType i = 0; i < doc.Size(); ++i) {
    out.push_back(
        PLUMB_TRY(read_delegate(doc[i], i, path + "[" + std::to_string(i) + "]", master_ifname, cni_version)));
  }
  return std::optional(std::move(out));
}

void del_delegates(const PlumbConfig& conf, const std::string& dir, const std::string& cni_path, const Sandbox& sb,
                   const std::vector<Delegate>& delegates, Log& log, Errors& errors) {
  const cni::PluginSearch search = plugin_search(conf, cni_path);
  for (size_t i = delegates.size(); i-- > 0;) errors.add(del_one(conf, dir, search, sb, delegates[i], i, log));
}

Result<bool> del(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  if (conf.multus_cache_dir.empty()) return false;
  auto delegates = read_delegates(conf.multus_cache_dir, env.container_id, env.ifname, conf.cni_version);
  if (!delegates) {
    // As Multus's DEL: a cache it cannot read is reported and the DEL succeeds (failing would
    // block the sandbox's removal for ever); the file stays for an operator to look at.
    log.error("DEL of container " + env.container_id + ": " + delegates.error().text());
    return false;
  }
  if (!*delegates) return false;
  Sandbox sb{env.container_id, env.netns, cni::delegate_args(env.args), json::clone(conf.runtime_config)};
  PLUMB_TRY(adopt(conf, env.path, sb, **delegates, "DEL", log));
  return true;
}

void gc(const cni::Env& env, const PlumbConfig& conf, Log& log, Errors& errors) {
  if (conf.multus_cache_dir.empty()) return;
  auto names = list_dir(conf.multus_cache_dir);
  if (!names) return errors.add(names.error().within("GC of Multus's cache"));
  std::vector<CachedAttachment> cached;
  bool cached_read = false;
  state::StateDir state(conf.state_dir);
  for (const auto& cid : *names) {
    std::error_code ec;
    if (!is_path_component(cid) || !std::filesystem::is_regular_file(conf.multus_cache_dir + "/" + cid, ec)) continue;
    if (std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(),
                    [&](auto& v) { return v.first == cid; }))
      continue;
    if (!std::exchange(cached_read, true)) cached = cached_attachments(conf.multus_cache_dir);
    auto delegates = read_delegates(conf.multus_cache_dir, cid, "eth0", conf.cni_version);
    if (!delegates || !*delegates) {
      if (!delegates) log.error("GC: " + delegates.error().text() + " (left in place)");
      continue;
    }
    auto& list = **delegates;
    Sandbox sb{cid, "", "", json::Document(rapidjson::kObjectType)};
    const std::string master = string_member(list.front().config, "name");
    for (const auto& c : cached) {
      if (c.container_id != cid) continue;
      if (sb.netns.empty()) sb.netns = c.netns;
      if (sb.cni_args.empty()) sb.cni_args = c.cni_args;
      if (c.network != master) continue;
      list.front().ifname = c.ifname;  // the interface libcni cached the first delegate under
      sb.cni_args = c.cni_args;
      sb.runtime_config = json::clone(c.capability_args);  // what the runtime gave Multus's ADD
    }
    auto lock = state.lock(state::Key{cid, list.front().ifname});
    errors.add(adopt(conf, env.path, sb, list, "GC", log));
    if (lock) state.release(*lock, state::Key{cid, list.front().ifname});
  }
}

}  // namespace plumb::pod::multus
