// NetworkAttachmentDefinition objects (spec 3.1, 3.3): DNS-1123 name checks and YAML parsing.
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "cni-entry/npwg/nad.hpp"

#include "engine/base/yaml_guard.hpp"

namespace plumb::nad {
namespace {

constexpr std::string_view kNadApiVersion = "k8s.cni.cncf.io/v1";
constexpr std::string_view kNadKind = "NetworkAttachmentDefinition";

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string where(const std::string& origin, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return origin;
  return origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

/// The scalar at `n[key]` (a map), nullopt when absent or null. Errors: kInvalidConfig when it is
/// not a scalar.
Result<std::optional<std::string>> scalar(const YAML::Node& n, const char* key, const std::string& what,
                                          const std::string& origin) {
  const YAML::Node v = n[key];
  if (!v.IsDefined() || v.IsNull()) return std::optional<std::string>{};
  if (!v.IsScalar()) return fail(cni_code::kInvalidConfig, where(origin, v) + ": " + what + " must be a string");
  return std::optional<std::string>(v.Scalar());
}

Result<std::optional<NetworkAttachmentDefinition>> parse_one(const YAML::Node& doc, const std::string& origin) {
  if (!doc.IsMap()) return std::optional<NetworkAttachmentDefinition>{};
  auto kind = PLUMB_TRY(scalar(doc, "kind", "kind", origin));
  auto api = PLUMB_TRY(scalar(doc, "apiVersion", "apiVersion", origin));
  if (kind.value_or("") != kNadKind || api.value_or("") != kNadApiVersion) {
    return std::optional<NetworkAttachmentDefinition>{};
  }
  NetworkAttachmentDefinition nad;
  const YAML::Node meta = doc["metadata"];
  if (!meta.IsDefined() || !meta.IsMap()) {
    return fail(cni_code::kInvalidConfig, where(origin, doc) + ": NetworkAttachmentDefinition has no metadata");
  }
  nad.name = PLUMB_TRY(scalar(meta, "name", "metadata.name", origin)).value_or("");
  if (!is_dns1123_label(nad.name)) {
    return fail(cni_code::kInvalidConfig, where(origin, meta) + ": NetworkAttachmentDefinition metadata.name \"" + nad.name +
                                              "\" is not a valid DNS-1123 label");
  }
  nad.namespace_ = PLUMB_TRY(scalar(meta, "namespace", "metadata.namespace", origin)).value_or("");
  if (nad.namespace_.empty()) nad.namespace_ = "default";
  if (!is_dns1123_label(nad.namespace_)) {
    return fail(cni_code::kInvalidConfig, where(origin, meta) + ": NetworkAttachmentDefinition " + nad.name +
                                              " metadata.namespace \"" + nad.namespace_ + "\" is not a valid DNS-1123 label");
  }
  const YAML::Node ann = meta["annotations"];
  if (ann.IsDefined() && !ann.IsNull()) {
    if (!ann.IsMap()) {
      return fail(cni_code::kInvalidConfig, where(origin, ann) + ": NetworkAttachmentDefinition " + nad.namespace_ + "/" +
                                                nad.name + " metadata.annotations must be a map");
    }
    for (const auto& kv : ann) {
      if (!kv.first.IsScalar() || !(kv.second.IsScalar() || kv.second.IsNull())) {
        return fail(cni_code::kInvalidConfig, where(origin, kv.first) + ": NetworkAttachmentDefinition " + nad.namespace_ +
                                                  "/" + nad.name + " annotation values must be strings");
      }
      nad.annotations[kv.first.Scalar()] = kv.second.IsNull() ? std::string{} : kv.second.Scalar();
    }
  }
  const YAML::Node spec = doc["spec"];
  if (spec.IsDefined() && !spec.IsNull()) {
    if (!spec.IsMap()) {
      return fail(cni_code::kInvalidConfig,
                  where(origin, spec) + ": NetworkAttachmentDefinition " + nad.namespace_ + "/" + nad.name + " spec must be a map");
    }
    nad.config = PLUMB_TRY(scalar(spec, "config", "NetworkAttachmentDefinition " + nad.namespace_ + "/" + nad.name + " spec.config", origin))
                     .value_or("");
  }
  return std::optional<NetworkAttachmentDefinition>(std::move(nad));
}

}  // namespace

bool is_dns1123_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

bool is_dns1123_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  while (true) {
    auto dot = s.find('.');
    if (!is_dns1123_label(s.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    s = s.substr(dot + 1);
  }
}

Result<std::vector<NetworkAttachmentDefinition>> parse_nad_yaml(std::string_view text, const std::string& origin) {
  PLUMB_TRY(yaml::check(text, "YAML " + origin));
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& ex) {
    std::string pos = ex.mark.is_null() ? std::string{} : ":" + std::to_string(ex.mark.line + 1) + ":" + std::to_string(ex.mark.column + 1);
    return fail(cni_code::kDecode, "cannot decode YAML " + origin + pos + ": " + ex.msg);
  }
  std::vector<NetworkAttachmentDefinition> out;
  try {
    for (const YAML::Node& doc : docs) {
      // `kubectl get -o yaml` wraps several objects in a List.
      if (doc.IsMap() && doc["kind"].IsDefined() && doc["kind"].IsScalar() && doc["kind"].Scalar() == "List") {
        const YAML::Node items = doc["items"];
        if (items.IsDefined() && items.IsSequence()) {
          for (const YAML::Node& item : items) {
            auto nad = PLUMB_TRY(parse_one(item, origin));
            if (nad) out.push_back(std::move(*nad));
          }
        }
        continue;
      }
      auto nad = PLUMB_TRY(parse_one(doc, origin));
      if (nad) out.push_back(std::move(*nad));
    }
  } catch (const YAML::Exception& ex) {
    return fail(cni_code::kDecode, "cannot read YAML " + origin + ": " + ex.msg);
  }
  return out;
}

}  // namespace plumb::nad
