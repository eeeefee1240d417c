// NetworkAttachmentDefinition objects (spec 3.1, 3.3): DNS-1123 name checks and YAML parsing.
#include <algorithm>

#include "cni-entry/npwg/nad.hpp"

#include "engine/base/yaml.hpp"

namespace plumb::nad {
namespace {

constexpr std::string_view kNadApiVersion = "k8s.cni.cncf.io/v1";
constexpr std::string_view kNadKind = "NetworkAttachmentDefinition";

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/// The string member `key` of `obj` (a map), nullopt when absent or null. Errors: kInvalidConfig
/// "<origin>: <what> must be a string, got <value>".
Result<std::optional<std::string>> string_member(const json::Value& obj, std::string_view key, const std::string& what,
                                                 const std::string& origin) {
  const json::Value* v = json::find(obj, key);
  if (v == nullptr) return std::optional<std::string>{};
  if (!v->IsString()) return fail(cni_code::kInvalidConfig, origin + ": " + what + " must be a string, got " + json::quote(*v));
  return std::optional<std::string>(std::string(v->GetString(), v->GetStringLength()));
}

/// The map member `key` of `obj`, nullptr when absent or null. Errors: kInvalidConfig naming `what`.
Result<const json::Value*> map_member(const json::Value& obj, std::string_view key, const std::string& what,
                                      const std::string& origin) {
  const json::Value* v = json::find(obj, key);
  if (v != nullptr && !v->IsObject()) return fail(cni_code::kInvalidConfig, origin + ": " + what + " must be a map, got " + json::quote(*v));
  return v;
}

/// metadata.annotations of a NAD into `nad`: a map of strings (null values read as "").
Status read_annotations(const json::Value& meta, NetworkAttachmentDefinition& nad, const std::string& origin) {
  const std::string who = "NetworkAttachmentDefinition " + nad.namespace_ + "/" + nad.name;
  const json::Value* ann = PLUMB_TRY(map_member(meta, "annotations", who + " metadata.annotations", origin));
  if (ann == nullptr) return {};
  for (const auto& kv : ann->GetObject()) {
    const std::string key(kv.name.GetString(), kv.name.GetStringLength());
    if (!kv.value.IsString() && !kv.value.IsNull()) {
      return fail(cni_code::kInvalidConfig, origin + ": " + who + " annotation values must be strings: metadata.annotations." +
                                                key + " is " + json::quote(kv.value));
    }
    nad.annotations[key] = kv.value.IsNull() ? std::string{} : std::string(kv.value.GetString(), kv.value.GetStringLength());
  }
  return {};
}

Result<std::optional<NetworkAttachmentDefinition>> parse_one(const json::Value& doc, const std::string& origin) {
  if (!doc.IsObject()) return std::optional<NetworkAttachmentDefinition>{};
  auto kind = PLUMB_TRY(string_member(doc, "kind", "kind", origin));
  auto api = PLUMB_TRY(string_member(doc, "apiVersion", "apiVersion", origin));
  if (kind.value_or("") != kNadKind || api.value_or("") != kNadApiVersion) {
    return std::optional<NetworkAttachmentDefinition>{};
  }
  NetworkAttachmentDefinition nad;
  const json::Value* meta = PLUMB_TRY(map_member(doc, "metadata", "NetworkAttachmentDefinition metadata", origin));
  if (meta == nullptr) return fail(cni_code::kInvalidConfig, origin + ": NetworkAttachmentDefinition has no metadata");
  nad.name = PLUMB_TRY(string_member(*meta, "name", "metadata.name", origin)).value_or("");
  if (!is_dns1123_label(nad.name)) {
    return fail(cni_code::kInvalidConfig, origin + ": NetworkAttachmentDefinition metadata.name \"" + nad.name +
                                              "\" is not a valid DNS-1123 label");
  }
  nad.namespace_ = PLUMB_TRY(string_member(*meta, "namespace", "metadata.namespace", origin)).value_or("");
  if (nad.namespace_.empty()) nad.namespace_ = "default";
  if (!is_dns1123_label(nad.namespace_)) {
    return fail(cni_code::kInvalidConfig, origin + ": NetworkAttachmentDefinition " + nad.name + " metadata.namespace \"" +
                                              nad.namespace_ + "\" is not a valid DNS-1123 label");
  }
  PLUMB_TRY(read_annotations(*meta, nad, origin));
  const std::string who = "NetworkAttachmentDefinition " + nad.namespace_ + "/" + nad.name;
  const json::Value* spec = PLUMB_TRY(map_member(doc, "spec", who + " spec", origin));
  if (spec != nullptr) nad.config = PLUMB_TRY(string_member(*spec, "config", who + " spec.config", origin)).value_or("");
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
  const std::vector<json::Document> docs = PLUMB_TRY(yaml::load_all(text, "YAML " + origin));
  std::vector<NetworkAttachmentDefinition> out;
  for (const json::Document& doc : docs) {
    // `kubectl get -o yaml` wraps several objects in a List.
    const json::Value* kind = doc.IsObject() ? json::find(doc, "kind") : nullptr;
    if (kind != nullptr && kind->IsString() && std::string_view(kind->GetString(), kind->GetStringLength()) == "List") {
      const json::Value* items = json::find(doc, "items");
      if (items == nullptr || !items->IsArray()) continue;
      for (const json::Value& item : items->GetArray()) {
        auto nad = PLUMB_TRY(parse_one(item, origin));
        if (nad) out.push_back(std::move(*nad));
      }
      continue;
    }
    auto nad = PLUMB_TRY(parse_one(doc, origin));
    if (nad) out.push_back(std::move(*nad));
  }
  return out;
}

}  // namespace plumb::nad
