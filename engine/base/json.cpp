#include "engine/base/json.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <strings.h>

#include <unordered_set>
#include <vector>

namespace plumb::json {
namespace {

std::string describe(const Value& v) {
  if (v.IsString()) return std::string("\"") + v.GetString() + "\"";
  return dump(v);
}

Error type_error(std::string_view where, std::string_view key, const Value& v, const char* want) {
  return Error{cni_code::kInvalidConfig, 0,
               std::string(where) + "." + std::string(key) + " must be " + want + ", got " + describe(v), {}};
}

/// Go's encoding/json (libcni, Multus, the reference plugins) keeps the last of duplicate object
/// keys; RapidJSON keeps them all and finds the first. Removes every earlier duplicate, in every
/// object of `root`, so plumb reads what a Go plugin reads. Iterative (input depth costs no stack)
/// and linear in the number of members.
void keep_last_duplicates(Document& root) {
  std::vector<Value*> pending{&root};
  std::unordered_set<std::string_view> seen;
  std::vector<bool> drop;
  while (!pending.empty()) {
    Value* v = pending.back();
    pending.pop_back();
    if (v->IsArray()) {
      for (auto& e : v->GetArray()) pending.push_back(&e);
      continue;
    }
    if (!v->IsObject() || v->MemberCount() < 2) {
      if (v->IsObject()) for (auto& m : v->GetObject()) pending.push_back(&m.value);
      continue;
    }
    seen.clear();
    drop.assign(v->MemberCount(), false);
    bool any = false;
    for (rapidjson::SizeType i = v->MemberCount(); i-- > 0;) {
      const Value& name = (v->MemberBegin() + i)->name;
      if (!seen.emplace(name.GetString(), name.GetStringLength()).second) any = drop[i] = true;
    }
    if (any) {
      Value kept(rapidjson::kObjectType);
      for (rapidjson::SizeType i = 0; i < drop.size(); ++i) {
        auto m = v->MemberBegin() + i;
        if (!drop[i]) kept.AddMember(std::move(m->name), std::move(m->value), root.GetAllocator());
      }
      *v = std::move(kept);
    }
    for (auto& m : v->GetObject()) pending.push_back(&m.value);
  }
}

}  // namespace

Result<Document> parse(std::string_view text, const std::string& what) {
  Document d;
  d.Parse(text.data(), text.size());
  if (d.HasParseError()) {
    return fail(cni_code::kDecode, "cannot decode " + what + ": " + rapidjson::GetParseError_En(d.GetParseError()) +
                                       " at offset " + std::to_string(d.GetErrorOffset()));
  }
  keep_last_duplicates(d);
  return d;
}

std::string dump(const Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return {sb.GetString(), sb.GetSize()};
}

Document clone(const Value& v) {
  Document d;
  d.CopyFrom(v, d.GetAllocator());
  return d;
}

const Value* find(const Value& obj, std::string_view key, bool ci) {
  if (!obj.IsObject()) return nullptr;
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    std::string_view name(it->name.GetString(), it->name.GetStringLength());
    bool match = ci ? (name.size() == key.size() && strncasecmp(name.data(), key.data(), key.size()) == 0) : name == key;
    if (match) return it->value.IsNull() ? nullptr : &it->value;
  }
  return nullptr;
}

Result<std::optional<std::string>> get_string(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return std::optional<std::string>{};
  if (!v->IsString()) return std::unexpected(type_error(where, key, *v, "a string"));
  return std::optional<std::string>(std::string(v->GetString(), v->GetStringLength()));
}

Result<std::optional<bool>> get_bool(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return std::optional<bool>{};
  if (!v->IsBool()) return std::unexpected(type_error(where, key, *v, "a boolean"));
  return std::optional<bool>(v->GetBool());
}

Result<std::optional<int64_t>> get_int(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return std::optional<int64_t>{};
  if (!v->IsInt64()) return std::unexpected(type_error(where, key, *v, "an integer"));
  return std::optional<int64_t>(v->GetInt64());
}

Result<std::optional<uint64_t>> get_uint(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return std::optional<uint64_t>{};
  if (!v->IsUint64()) return std::unexpected(type_error(where, key, *v, "a non-negative integer"));
  return std::optional<uint64_t>(v->GetUint64());
}

Result<std::optional<std::vector<std::string>>> get_string_array(const Value& obj, std::string_view key,
                                                                  std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return std::optional<std::vector<std::string>>{};
  if (!v->IsArray()) return std::unexpected(type_error(where, key, *v, "an array of strings"));
  std::vector<std::string> out;
  for (auto& e : v->GetArray()) {
    if (!e.IsString()) return std::unexpected(type_error(where, key, *v, "an array of strings"));
    out.emplace_back(e.GetString(), e.GetStringLength());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Result<const Value*> get_object(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return static_cast<const Value*>(nullptr);
  if (!v->IsObject()) return std::unexpected(type_error(where, key, *v, "an object"));
  return v;
}

Result<const Value*> get_array(const Value& obj, std::string_view key, std::string_view where, bool ci) {
  const Value* v = find(obj, key, ci);
  if (v == nullptr) return static_cast<const Value*>(nullptr);
  if (!v->IsArray()) return std::unexpected(type_error(where, key, *v, "an array"));
  return v;
}

void set(Value& obj, std::string_view key, Value value, rapidjson::Document::AllocatorType& alloc) {
  auto it = obj.FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it != obj.MemberEnd()) {
    it->value = std::move(value);
    return;
  }
  obj.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc), std::move(value), alloc);
}

}  // namespace plumb::json
