#include "cni-entry/pod/config.hpp"

#include "engine/cni/cni.hpp"
#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/source/kube.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

namespace plumb::pod {
namespace {

/// Multus accepts globalNamespaces as a comma-separated string; accept a list too.
Result<std::vector<std::string>> string_or_list(const json::Value& obj, std::string_view key) {
  const json::Value* v = json::find(obj, key);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->IsString()) {
    std::string s = v->GetString();
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  auto list = PLUMB_TRY(json::get_string_array(obj, key, "plumb config"));
  return list.value_or(out);
}

Result<std::vector<std::pair<std::string, std::string>>> attachments(const json::Value& obj, std::string_view key) {
  std::vector<std::pair<std::string, std::string>> out;
  const json::Value* list = PLUMB_TRY(json::get_array(obj, key, "plumb config"));
  if (list == nullptr) return out;
  for (auto& e : list->GetArray()) {
    auto cid = PLUMB_TRY(json::get_string(e, "containerID", std::string(key)));
    auto ifn = PLUMB_TRY(json::get_string(e, "ifname", std::string(key)));
    if (!cid || !ifn) return fail(cni_code::kInvalidConfig, std::string(key) + " entries need containerID and ifname: " + json::quote(e));
    out.emplace_back(*cid, *ifn);
  }
  return out;
}

/// podResourcesSocket (an absolute path) and podResourcesTimeoutSeconds (in (0, 300]).
Status parse_pod_resources(const json::Value& d, PlumbConfig& c) {
  if (auto v = PLUMB_TRY(json::get_string(d, "podResourcesSocket", "plumb config"))) {
    if (v->empty() || v->front() != '/') {
      return fail(cni_code::kInvalidConfig, "plumb config.podResourcesSocket \"" + *v + "\" must be an absolute path");
    }
    c.pod_resources_socket = *v;
  }
  if (const json::Value* t = json::find(d, "podResourcesTimeoutSeconds")) {
    if (!t->IsNumber() || !(t->GetDouble() > 0) || t->GetDouble() > 300) {
      return fail(cni_code::kInvalidConfig, "plumb config.podResourcesTimeoutSeconds " + json::quote(*t) +
                                                " must be a number of seconds in (0, 300]");
    }
    c.pod_resources_timeout_seconds = t->GetDouble();
  }
  return {};
}

/// statusErrorsFatal and statusAfterAnswer, which exclude each other: a write made after the
/// runtime's answer can no longer fail the ADD.
Status parse_status_keys(const json::Value& d, PlumbConfig& c) {
  const std::string w = "plumb config";
  c.status_errors_fatal = PLUMB_TRY(json::get_bool(d, "statusErrorsFatal", w)).value_or(false);
  c.status_after_answer = PLUMB_TRY(json::get_bool(d, "statusAfterAnswer", w)).value_or(false);
  if (c.status_after_answer && c.status_errors_fatal) {
    return fail(cni_code::kInvalidConfig,
                "plumb config.statusAfterAnswer true and statusErrorsFatal true exclude each other: a network-status "
                "write after the runtime's answer cannot fail the ADD");
  }
  return {};
}

/// nodeName, which `plumb install` writes from the DaemonSet's NODE_NAME: a node name (not
/// empty, no '/', as ipam::cluster::node_name requires).
Status parse_node_name(const json::Value& d, PlumbConfig& c) {
  auto v = PLUMB_TRY(json::get_string(d, "nodeName", "plumb config"));
  if (!v) return {};
  if (v->empty() || v->find('/') != std::string::npos) {
    return fail(cni_code::kInvalidConfig, "plumb config.nodeName \"" + *v + "\" is not a node name (empty or contains '/')");
  }
  c.node_name = *v;
  return {};
}

}  // namespace

Result<PlumbConfig> parse_config(std::string_view text) {
  json::Document d = PLUMB_TRY(json::parse(text, "network configuration on stdin"));
  if (!d.IsObject()) return fail(cni_code::kDecode, "network configuration on stdin is not a JSON object");
  PlumbConfig c;
  const std::string w = "plumb config";
  c.cni_version = PLUMB_TRY(json::get_string(d, "cniVersion", w)).value_or("0.1.0");
  if (!cni::version_supported(c.cni_version)) {
    return fail(cni_code::kIncompatibleVersion, "cniVersion \"" + c.cni_version + "\" is not supported (plumb supports 0.1.0 to 1.1.0)");
  }
  c.name = PLUMB_TRY(json::get_string(d, "name", w)).value_or("");
  c.cluster_network = PLUMB_TRY(json::get_string(d, "clusterNetwork", w)).value_or("");
  c.default_networks = PLUMB_TRY(string_or_list(d, "defaultNetworks"));
  if (auto v = PLUMB_TRY(json::get_string(d, "multusNamespace", w))) c.multus_namespace = *v;
  c.namespace_isolation = PLUMB_TRY(json::get_bool(d, "namespaceIsolation", w)).value_or(false);
  c.global_namespaces = PLUMB_TRY(string_or_list(d, "globalNamespaces"));
  if (json::find(d, "systemNamespaces") != nullptr) c.system_namespaces = PLUMB_TRY(string_or_list(d, "systemNamespaces"));
  if (auto v = PLUMB_TRY(json::get_string(d, "storeDir", w))) c.store_dir = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "stateDir", w))) c.state_dir = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "confDir", w))) c.conf_dir = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "sysfsRoot", w))) c.sysfs_root = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "deviceInfoDir", w))) c.device_info_dir = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "bpffsDir", w))) {
    if (v->empty() || v->front() != '/') return fail(cni_code::kInvalidConfig, "plumb config.bpffsDir \"" + *v + "\" must be an absolute path");
    c.bpffs_dir = *v;
  }
  if (auto v = PLUMB_TRY(json::get_string(d, "tuningAllowlist", w))) c.tuning_allowlist = *v;
  c.strict_annotations = PLUMB_TRY(json::get_bool(d, "strictAnnotations", w)).value_or(false);
  if (auto v = PLUMB_TRY(json::get_string(d, "logFile", w))) c.log_file = *v;
  if (auto v = PLUMB_TRY(json::get_string(d, "logLevel", w))) {
    std::string l = *v;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (l != "panic" && l != "error" && l != "warning" && l != "verbose" && l != "info" && l != "debug") {
      return fail(cni_code::kInvalidConfig,
                  "plumb config.logLevel \"" + *v + "\" must be panic, error, warning, verbose, info or debug");
    }
    c.log_level = l;  // Multus matches levels case-insensitively
  }
  if (auto v = PLUMB_TRY(json::get_string(d, "kubeconfig", w))) c.kubeconfig = *v;
  if (const json::Value* t = json::find(d, "apiTimeoutSeconds")) {
    if (!t->IsNumber() || !(t->GetDouble() > 0) || t->GetDouble() > 3600) {
      return fail(cni_code::kInvalidConfig, "plumb config.apiTimeoutSeconds " + json::quote(*t) + " must be a number of seconds in (0, 3600]");
    }
    c.api_timeout_seconds = t->GetDouble();
  }
  if (auto v = PLUMB_TRY(json::get_int(d, "apiRetries", w))) {
    if (*v < 0 || *v > 20) return fail(cni_code::kInvalidConfig, "plumb config.apiRetries " + std::to_string(*v) + " must be in 0..20");
    c.api_retries = static_cast<int>(*v);
  }
  PLUMB_TRY(parse_status_keys(d, c));
  if (auto v = PLUMB_TRY(json::get_string(d, "whereaboutsNamespace", w)); v && !v->empty()) {
    if (!nad::is_dns1123_label(*v)) {
      return fail(cni_code::kInvalidConfig, "plumb config.whereaboutsNamespace \"" + *v + "\" is not a namespace name (DNS-1123 label)");
    }
    c.whereabouts_namespace = *v;
  }
  PLUMB_TRY(parse_node_name(d, c));
  PLUMB_TRY(parse_pod_resources(d, c));
  PLUMB_TRY(parse_multus_keys(d, c));
  for (const auto* key : {"storeDir", "stateDir"}) {
    const std::string& p = std::string_view(key) == "storeDir" ? c.store_dir : c.state_dir;
    if (p.empty() || p.front() != '/') return fail(cni_code::kInvalidConfig, std::string("plumb config.") + key + " \"" + p + "\" must be an absolute path");
  }

  c.runtime_config.SetObject();
  if (const json::Value* rc = PLUMB_TRY(json::get_object(d, "runtimeConfig", w))) {
    c.runtime_config = cni::canonicalize_runtime_config(*rc);
    if (const json::Value* pa = PLUMB_TRY(json::get_object(c.runtime_config, "io.kubernetes.cri.pod-annotations", "runtimeConfig"))) {
      std::map<std::string, std::string> annotations;
      for (auto it = pa->MemberBegin(); it != pa->MemberEnd(); ++it) {
        if (it->value.IsString()) annotations[it->name.GetString()] = it->value.GetString();
      }
      c.pod_annotations = std::move(annotations);
    }
  }
  if (const json::Value* prev = json::find(d, "prevResult")) c.prev_result.CopyFrom(*prev, c.prev_result.GetAllocator());
  auto valid = PLUMB_TRY(attachments(d, "cni.dev/valid-attachments"));
  auto legacy = PLUMB_TRY(attachments(d, "cni.dev/attachments"));
  c.valid_attachments = std::move(valid);
  c.valid_attachments.insert(c.valid_attachments.end(), legacy.begin(), legacy.end());
  return c;
}

k8s::Options api_options(const PlumbConfig& conf) {
  k8s::Options opts;
  opts.timeout = std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(conf.api_timeout_seconds));
  if (opts.timeout.count() < 1) opts.timeout = std::chrono::milliseconds(1);
  opts.retries = conf.api_retries;
  return opts;
}

ipam::ClusterAccess ipam_cluster(const PlumbConfig& conf) {
  return ipam::ClusterAccess{conf.kubeconfig, api_options(conf), conf.whereabouts_namespace};
}

Result<std::unique_ptr<source::PodSource>> make_source(const PlumbConfig& conf) {
  auto creds = k8s::configured(conf.kubeconfig);
  if (!creds) {
    return std::unexpected(conf.kubeconfig.empty() ? creds.error() : creds.error().within("plumb config.kubeconfig"));
  }
  if (*creds) return source::kube::make_kube_source(std::move(**creds), api_options(conf), conf.multus_namespace);
  return source::make_local_store(conf.store_dir);
}

}  // namespace plumb::pod
