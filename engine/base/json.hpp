// Small typed accessors over RapidJSON values whose errors name the offending field and value.
// Parsing itself is RapidJSON's; nothing here tokenizes JSON.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::json {

using Value = rapidjson::Value;
using Document = rapidjson::Document;

/// How deep arrays and objects may nest in any JSON plumb reads from outside (stdin, NAD configs,
/// annotations, API and etcd answers, device-info files, delegated plugins' output): the same
/// bound as YAML (yaml.hpp). CNI configs nest about 8 deep.
inline constexpr unsigned kMaxDepth = 64;

/// Parses `text` with RapidJSON's parser (recursing at most `max_depth` levels whatever the
/// input; iterative where `max_depth` is beyond 256) and at most `max_depth` levels of
/// arrays/objects. Errors: kDecode naming `what` and the byte offset of the syntax error, or
/// "nested deeper than <max_depth> levels" with the offset where it was.
/// Of duplicate object keys the last is kept, as Go's encoding/json (libcni and the reference
/// plugins) does, but in "sysctl" objects (tuning refuses a key given twice, as the reference).
[[nodiscard]] Result<Document> parse(std::string_view text, const std::string& what, unsigned max_depth = kMaxDepth);
/// Go's encoding/json (libcni, Multus, the reference plugins) keeps the last of duplicate object
/// keys; RapidJSON keeps them all and finds the first. Removes every earlier duplicate in every
/// object of `root` (but in "sysctl" objects, which tuning checks itself), so plumb reads what a Go
/// program reads. Iterative and linear in the number of members. parse() and yaml::load_all call it.
void keep_last_duplicates(Document& root);
/// Serializes compactly (recursive: for documents plumb built or parsed, which parse() bounds).
[[nodiscard]] std::string dump(const Value& v);
/// A value quoted for an error message: compact JSON of at most about `max_bytes` bytes, cut with
/// "..." where longer (strings too, at a UTF-8 boundary). Walks the value with its own stack, never
/// recursing, so any depth is safe.
[[nodiscard]] std::string quote(const Value& v, size_t max_bytes = 160);
/// Deep copy of `v` into a new document.
[[nodiscard]] Document clone(const Value& v);

/// Finds member `key` of object `obj`; nullptr when absent or null. With ci, the match ignores
/// ASCII case (runtimeConfig keys from containerd are capitalised).
[[nodiscard]] const Value* find(const Value& obj, std::string_view key, bool ci = false);

// Typed getters: nullopt when the key is absent (or null); an error with code kInvalidConfig
// naming "<where>.<key>" and the value when the type is wrong.
[[nodiscard]] Result<std::optional<std::string>> get_string(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
[[nodiscard]] Result<std::optional<bool>> get_bool(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
[[nodiscard]] Result<std::optional<int64_t>> get_int(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
[[nodiscard]] Result<std::optional<uint64_t>> get_uint(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
[[nodiscard]] Result<std::optional<std::vector<std::string>>> get_string_array(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
/// The member if it is an object, nullptr if absent; an error if present but not an object.
[[nodiscard]] Result<const Value*> get_object(const Value& obj, std::string_view key, std::string_view where, bool ci = false);
/// The member if it is an array, nullptr if absent; an error if present but not an array.
[[nodiscard]] Result<const Value*> get_array(const Value& obj, std::string_view key, std::string_view where, bool ci = false);

/// Sets (adds or replaces) obj[key] = value (value is moved in), using `alloc`.
void set(Value& obj, std::string_view key, Value value, rapidjson::Document::AllocatorType& alloc);
inline void set_string(Value& obj, std::string_view key, std::string_view s, rapidjson::Document::AllocatorType& alloc) {
  set(obj, key, Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), alloc), alloc);
}

}  // namespace plumb::json
