// Multus's thin-plugin keys plumb reads besides the ones config.cpp has always read (see
// config.hpp parse_multus_keys), each honoured with Multus's meaning or refused by name.
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

/// Keys plumb does not implement: refused by name (ADD, CHECK, GC and STATUS fail; DEL goes on).
void refuse_unsupported(const json::Value& d, PlumbConfig& c) {
  if (json::find(d, "logOptions") != nullptr) {
    c.refused.push_back(Error{cni_code::kInvalidConfig, 0,
                              kWhere + ".logOptions is not supported: plumb does not rotate logFile itself "
                                       "(remove logOptions and rotate the file with logrotate's copytruncate)",
                              {}});
  }
  const json::Value* aux = json::find(d, "auxiliaryCNIChainName");
  if (aux != nullptr && !(aux->IsString() && aux->GetStringLength() == 0)) {
    c.refused.push_back(Error{cni_code::kInvalidConfig, 0,
                              kWhere + ".auxiliaryCNIChainName " + json::quote(*aux) +
                                  " is not supported: put the chained plugins in the clusterNetwork's conflist instead",
                              {}});
  }
}

}  // namespace

Status parse_multus_keys(const json::Value& d, PlumbConfig& c) {
  if (auto v = PLUMB_TRY(json::get_string(d, "binDir", kWhere))) {
    if (!v->empty() && v->front() != '/') return fail(cni_code::kInvalidConfig, kWhere + ".binDir \"" + *v + "\" must be an absolute path");
    c.bin_dir = *v;
  }
  PLUMB_TRY(parse_cni_dir(d, c));
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
  refuse_unsupported(d, c);
  return {};
}

cni::PluginSearch plugin_search(const PlumbConfig& conf, const std::string& cni_path_env) {
  auto ms = std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(conf.delegate_timeout_seconds));
  cni::PluginSearch s = cni::make_search(conf.bin_dir, cni_path_env, ms);
  s.root = conf.chroot_dir;
  return s;
}

}  // namespace plumb::pod
