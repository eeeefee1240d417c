// Multus's thin-plugin keys plumb reads besides the ones config.cpp has always read (see
// config.hpp parse_multus_keys), each honoured with Multus's meaning.
#include <cmath>

#include "cni-entry/pod/config.hpp"

namespace plumb::pod {
namespace {

const std::string kWhere = "plumb config";

/// A number of seconds in [min, max] (min exclusive when min_exclusive).
Result<std::optional<double>> seconds(const json::Value& d, const char* key, double min, bool min_exclusive, double max) {
  const json::Value* t = json::find(d, key);
  if (t == nullptr) return std::optional<double>{};
  bool ok = t->IsNumber() && std::isfinite(t->GetDouble()) && t->GetDouble() <= max &&
            (min_exclusive ? t->GetDouble() > min : t->GetDouble() >= min);
  if (!ok) {
    return fail(cni_code::kInvalidConfig, kWhere + "." + key + " " + json::quote(*t) + " must be a number of seconds in " +
                                              (min_exclusive ? "(" : "[") + std::to_string(static_cast<int>(min)) + ", " +
                                              std::to_string(static_cast<int>(max)) + "]");
  }
  return std::optional<double>(t->GetDouble());
}

/// cniDir is Multus's name for its data directory: plumb's stateDir.
Status parse_cni_dir(const json::Value& d, PlumbConfig& c) {
  auto cni_dir = PLUMB_TRY(json::get_string(d, "cniDir", kWhere));
  if (!cni_dir) return {};
  auto state_dir = PLUMB_TRY(json::get_string(d, "stateDir", kWhere));
  if (state_dir && *state_dir != *cni_dir) {
    return fail(cni_code::kInvalidConfig, kWhere + ".cniDir \"" + *cni_dir + "\" and stateDir \"" + *state_dir +
                                              "\" name plumb's state directory differently: set one of them");
  }
  c.state_dir = *cni_dir;
  return {};
}

/// delegates: a list of CNI configs (.conf or .conflist shape); the first is the default
/// network when clusterNetwork is not set (Multus ignores delegates otherwise).
Status parse_delegates(const json::Value& d, PlumbConfig& c) {
  const json::Value* list = PLUMB_TRY(json::get_array(d, "delegates", kWhere));
  if (list == nullptr) return {};
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    if (!(*list)[i].IsObject()) {
      return fail(cni_code::kInvalidConfig, kWhere + ".delegates[" + std::to_string(i) + "] must be a CNI config object, got " +
                                                json::quote((*list)[i]));
    }
  }
  c.delegates.CopyFrom(*list, c.delegates.GetAllocator());
  return {};
}

/// logOptions: Multus's rotation of logFile (log.hpp LogRotation), each key a whole number >= 0
/// (compress a boolean); what is not given keeps Multus's default.
Status parse_log_options(const json::Value& d, PlumbConfig& c) {
  const json::Value* o = PLUMB_TRY(json::get_object(d, "logOptions", kWhere));
  if (o == nullptr) return {};
  const std::string w = kWhere + ".logOptions";
  struct Int {
    const char* key;
    int* out;
  };
  for (Int k : {Int{"maxSize", &c.log_rotation.max_size_mb}, Int{"maxAge", &c.log_rotation.max_age_days},
                Int{"maxBackups", &c.log_rotation.max_backups}}) {
    auto v = PLUMB_TRY(json::get_int(*o, k.key, w));
    if (!v) continue;
    if (*v < 0 || *v > 1000000) return fail(cni_code::kInvalidConfig, w + "." + k.key + " " + std::to_string(*v) + " must be 0..1000000");
    *k.out = static_cast<int>(*v);
  }
  if (auto v = PLUMB_TRY(json::get_bool(*o, "compress", w))) c.log_rotation.compress = *v;
  return {};
}

/// auxiliaryCNIChainName: the name of Multus's auxiliary chain (plan.cpp runs it), a valid CNI
/// network name since it names a directory.
Status parse_auxiliary_chain(const json::Value& d, PlumbConfig& c) {
  auto v = PLUMB_TRY(json::get_string(d, "auxiliaryCNIChainName", kWhere));
  if (!v || v->empty()) return {};
  if (!cni::is_valid_network_name(*v)) {
    return fail(cni_code::kInvalidConfig, kWhere + ".auxiliaryCNIChainName \"" + *v +
                                              "\" is not a valid network name (a letter or digit, then letters, digits, '_', '.' or '-')");
  }
  c.auxiliary_chain_name = *v;
  return {};
}

}  // namespace

Status parse_multus_keys(const json::Value& d, PlumbConfig& c) {
  if (auto v = PLUMB_TRY(json::get_string(d, "binDir", kWhere))) {
    if (!v->empty() && v->front() != '/') return fail(cni_code::kInvalidConfig, kWhere + ".binDir \"" + *v + "\" must be an absolute path");
    c.bin_dir = *v;
  }
  PLUMB_TRY(parse_cni_dir(d, c));
  if (auto v = PLUMB_TRY(json::get_string(d, "multusCacheDir", kWhere))) {
    if (!v->empty() && v->front() != '/')
      return fail(cni_code::kInvalidConfig, kWhere + ".multusCacheDir \"" + *v + "\" must be an absolute path or \"\"");
    c.multus_cache_dir = *v;
  }
  if (auto v = PLUMB_TRY(json::get_string(d, "chrootDir", kWhere))) {
    if (!v->empty() && v->front() != '/') return fail(cni_code::kInvalidConfig, kWhere + ".chrootDir \"" + *v + "\" must be an absolute path");
    c.chroot_dir = *v == "/" ? "" : *v;
  }
  PLUMB_TRY(parse_delegates(d, c));
  if (auto v = PLUMB_TRY(json::get_string(d, "readinessindicatorfile", kWhere))) c.readiness_indicator_file = *v;
  c.log_to_stderr = PLUMB_TRY(json::get_bool(d, "logToStderr", kWhere)).value_or(true);
  c.retry_delete_on_error = PLUMB_TRY(json::get_bool(d, "retryDeleteOnError", kWhere)).value_or(false);
  if (auto v = PLUMB_TRY(seconds(d, "delegateTimeoutSeconds", 0, true, 600))) c.delegate_timeout_seconds = *v;
  if (auto v = PLUMB_TRY(seconds(d, "readinessTimeoutSeconds", 0, false, 600))) c.readiness_timeout_seconds = *v;
  PLUMB_TRY(parse_auxiliary_chain(d, c));
  PLUMB_TRY(parse_log_options(d, c));
  return {};
}

cni::PluginSearch plugin_search(const PlumbConfig& conf, const std::string& cni_path_env) {
  auto ms = std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(conf.delegate_timeout_seconds));
  cni::PluginSearch s = cni::make_search(conf.bin_dir, cni_path_env, ms);
  s.root = conf.chroot_dir;
  return s;
}

}  // namespace plumb::pod
