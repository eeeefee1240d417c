// Delegation to CNI plugins plumb does not implement (delegate.hpp).
#include "engine/cni/delegate.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/base/text.hpp"

namespace plumb::cni {
namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr size_t kStderrShown = 4096;

/// A plugin's stderr as it goes into a message: trimmed, at most kStderrShown bytes.
std::string shown_stderr(const std::string& err) {
  std::string s(text::trim(err));
  if (s.size() > kStderrShown) {
    s.resize(kStderrShown);
    s.append("...");
  }
  return s;
}

std::string seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

/// The CNI error a failed plugin printed, or kDelegate with its stderr.
Error plugin_error(const std::string& who, const process::Outcome& o) {
  std::string err = shown_stderr(o.err);
  auto doc = json::parse(o.out, who + " error");
  if (doc && doc->IsObject()) {
    const json::Value* code = json::find(*doc, "code");
    const json::Value* msg = json::find(*doc, "msg");
    if (code != nullptr && code->IsUint() && code->GetUint() != 0) {
      Error e{code->GetUint(), 0, who + ": " + (msg != nullptr && msg->IsString() ? msg->GetString() : "(no msg)"), {}};
      if (const json::Value* d = json::find(*doc, "details"); d != nullptr && d->IsString()) e.details = d->GetString();
      if (!err.empty()) e.details += (e.details.empty() ? "stderr: " : "; stderr: ") + err;
      return e;
    }
  }
  std::string how = o.signal != 0 ? "was killed by signal " + std::to_string(o.signal) : "exited with status " + std::to_string(o.exit_code);
  std::string msg = who + " " + how + " without a CNI error";
  if (!err.empty()) msg += "; stderr: " + err;
  if (!text::trim(o.out).empty()) msg += "; stdout: " + shown_stderr(o.out);
  return Error{cni_code::kDelegate, 0, msg, {}};
}

}  // namespace

std::string PluginSearch::cni_path() const {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ":") + d;
  return out;
}

PluginSearch make_search(const std::string& bin_dir, std::string_view cni_path, std::chrono::milliseconds timeout) {
  PluginSearch s;
  s.timeout = timeout;
  auto add = [&](std::string_view d) {
    d = text::trim(d);
    if (d.empty() || std::find(s.dirs.begin(), s.dirs.end(), d) != s.dirs.end()) return;
    s.dirs.emplace_back(d);
  };
  add(bin_dir);
  for (auto d : text::split(cni_path, ':')) add(d);
  return s;
}

Result<std::string> find_plugin(std::string_view type, const PluginSearch& search) {
  if (type.empty() || type == "." || type == ".." || type.find('/') != std::string_view::npos ||
      type.find('\0') != std::string_view::npos) {
    return fail(cni_code::kInvalidConfig, "CNI plugin type \"" + std::string(type) + "\" is not a plain file name");
  }
  std::string searched;
  for (const auto& dir : search.dirs) {
    std::string path = dir + "/" + std::string(type);
    const std::string seen = search.root.empty() ? path : search.root + path;  // as plumb opens it
    struct stat st {};
    if (::stat(seen.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(seen.c_str(), X_OK) == 0) return path;
    searched += (searched.empty() ? "" : ", ") + dir;
  }
  return fail(cni_code::kNotFound, "CNI plugin type \"" + std::string(type) + "\" not found in " +
                                       (searched.empty() ? std::string("(no directory: set binDir or CNI_PATH)") : searched) +
                                       (search.root.empty() ? "" : " under chrootDir " + search.root));
}

std::string delegate_args(const std::vector<std::pair<std::string, std::string>>& runtime_args) {
  std::vector<std::pair<std::string, std::string>> args = {
      {"IgnoreUnknown", "true"}, {"K8S_POD_NAMESPACE", ""}, {"K8S_POD_NAME", ""}, {"K8S_POD_INFRA_CONTAINER_ID", ""}, {"K8S_POD_UID", ""}};
  const size_t fixed = args.size();
  for (const auto& [k, v] : runtime_args) {
    auto it = std::find_if(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(fixed), [&](const auto& a) { return a.first == k; });
    if (it == args.begin() + static_cast<std::ptrdiff_t>(fixed)) {
      args.emplace_back(k, v);
    } else if (it->second.empty()) {
      it->second = v;
    }
  }
  std::string out;
  for (const auto& [k, v] : args) out += (out.empty() ? "" : ";") + k + "=" + v;
  return out;
}

std::vector<std::string> plugin_environment(const Invocation& inv, const std::string& cni_path, const char* const* base) {
  std::vector<std::string> env = {"CNI_COMMAND=" + inv.command, "CNI_CONTAINERID=" + inv.container_id, "CNI_NETNS=" + inv.netns,
                                  "CNI_ARGS=" + inv.args,       "CNI_IFNAME=" + inv.ifname,            "CNI_PATH=" + cni_path};
  const size_t own = env.size();
  bool has_path = false;
  for (const char* const* e = base; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(env.begin(), env.begin() + static_cast<std::ptrdiff_t>(own),
                                      [&](const std::string& o) { return o.compare(0, key.size() + 1, std::string(key) + "=") == 0; });
    if (replaced) continue;
    has_path = has_path || key == "PATH";
    env.emplace_back(entry);
  }
  if (!has_path) env.push_back(std::string("PATH=") + kDefaultPath);
  return env;
}

Result<json::Document> exec_plugin(std::string_view type, const std::string& binary, const Invocation& inv,
                                   std::string_view config, const PluginSearch& search,
                                   const std::function<Status(const process::Child&)>& on_started) {
  const std::string who = "plugin " + std::string(type) + " (" + inv.command + ")";
  process::SpawnRequest req;
  req.path = binary;
  req.env = plugin_environment(inv, search.cni_path(), environ);
  req.stdin_data = std::string(config);
  req.root = search.root;
  req.timeout = search.timeout;
  req.on_started = on_started;
  auto o = process::run(req);
  if (!o) return std::unexpected(o.error().within(who));
  if (o->timed_out) {
    std::string msg = who + " did not finish within " + seconds(search.timeout) + " (delegateTimeoutSeconds) and was killed";
    if (!text::trim(o->err).empty()) msg += "; stderr: " + shown_stderr(o->err);
    return fail(cni_code::kDelegate, msg);
  }
  if (o->exit_code != 0) return std::unexpected(plugin_error(who, *o));
  json::Document out;
  if (text::trim(o->out).empty()) return out;
  auto doc = json::parse(o->out, who + " output");
  if (!doc) return std::unexpected(doc.error());
  return std::move(*doc);
}

Result<json::Document> with_prev_result(const json::Value& conf, const CniResult* prev, std::string_view version) {
  json::Document d = json::clone(conf);
  if (!d.IsObject()) return fail(cni_code::kInvalidConfig, "a delegated plugin's config is not an object");
  d.RemoveMember("prevResult");
  if (prev != nullptr) {
    json::Document enc = PLUMB_TRY(encode_result(*prev, version));
    json::Value v;
    v.CopyFrom(enc, d.GetAllocator());
    json::set(d, "prevResult", std::move(v), d.GetAllocator());
  }
  return d;
}

Result<CniResult> decode_plugin_result(std::string_view type, const json::Value& out, std::string_view config_version) {
  std::string version(config_version);
  if (const json::Value* v = json::find(out, "cniVersion"); v != nullptr && v->IsString() && version_supported(v->GetString())) {
    version = v->GetString();
  }
  auto r = decode_result(out, version);
  if (!r) return std::unexpected(r.error().within("result of plugin " + std::string(type)));
  return r;
}

}  // namespace plumb::cni
