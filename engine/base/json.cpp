#include "engine/base/json.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <strings.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace plumb::json {
namespace {

Error type_error(std::string_view where, std::string_view key, const Value& v, const char* want) {
  return Error{cni_code::kInvalidConfig, 0,
               std::string(where) + "." + std::string(key) + " must be " + want + ", got " + quote(v), {}};
}

/// Passes RapidJSON's parse events to a Document, refusing (and remembering it) a nesting deeper
/// than `max_depth`: the parse then ends with kParseErrorTermination at that point. Numbers come
/// as text (kParseNumbersAsStringsFlag) and are converted here exactly (RawNumber).
class DepthLimit {
 public:
  DepthLimit(Document& doc, unsigned max_depth) : doc_(doc), max_depth_(max_depth) {}
  [[nodiscard]] bool too_deep() const { return too_deep_; }
  [[nodiscard]] bool too_big() const { return too_big_; }

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy);
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return enter() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) { return leave() && doc_.EndObject(n); }
  bool StartArray() { return enter() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return leave() && doc_.EndArray(n); }

 private:
  bool enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }
  bool leave() {
    --depth_;
    return true;
  }

  Document& doc_;
  unsigned max_depth_;
  unsigned depth_ = 0;
  bool too_deep_ = false;
  bool too_big_ = false;
};

/// A JSON number's text (valid: the reader checked its grammar) as the value RapidJSON's own
/// conversion types it (an integer: int, unsigned, int64 or uint64 as it fits, beyond 64 bits a
/// double; otherwise a double), but correctly rounded: RapidJSON 1.1's default conversion is not
/// (a 19-digit mantissa can read back as another double than the one written), and its
/// full-precision mode has undefined behaviour on a zero significand with an exponent
/// ("0.0E130"). A double beyond the range of doubles is refused, as RapidJSON refuses it.
bool DepthLimit::RawNumber(const char* s, rapidjson::SizeType n, bool) {
  const std::string_view t(s, n);
  auto whole = [&](auto& v) {  // the text is one integer that fits v
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && end == t.data() + t.size();
  };
  if (t.find_first_of(".eE") == std::string_view::npos) {
    if (int64_t v = 0; t.front() == '-' && whole(v)) {
      return v >= std::numeric_limits<int32_t>::min() ? doc_.Int(static_cast<int>(v)) : doc_.Int64(v);
    }
    if (uint64_t v = 0; t.front() != '-' && whole(v)) {
      return v <= std::numeric_limits<uint32_t>::max() ? doc_.Uint(static_cast<unsigned>(v)) : doc_.Uint64(v);
    }
  }
  const std::string text(t);  // strtod needs the terminating NUL; glibc's strtod rounds correctly
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isinf(d)) {
    too_big_ = true;  // the parse ends with an error
    return false;
  }
  return doc_.Double(d);
}

/// Document::Populate's generator: one parse of `text` through a DepthLimit. Up to
/// kRecursiveDepth levels RapidJSON's recursive parser (cheaper per byte than its iterative one):
/// the DepthLimit refuses an array or object before the parser descends into it, so it recurses
/// at most that deep whatever the input; deeper limits get the iterative parser (its own stack).
struct BoundedParse {
  std::string_view text;
  unsigned max_depth;
  rapidjson::ParseResult result;
  bool too_deep = false;
  bool too_big = false;

  bool operator()(Document& doc) {
    DepthLimit limit(doc, max_depth);
    rapidjson::MemoryStream in(text.data(), text.size());
    rapidjson::Reader reader;
    constexpr unsigned kRecursiveDepth = 256;  // records nest up to 2 * kMaxDepth
    result = max_depth <= kRecursiveDepth
                 ? reader.Parse<rapidjson::kParseNumbersAsStringsFlag>(in, limit)
                 : reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag>(in, limit);
    too_deep = limit.too_deep();
    too_big = limit.too_big();
    return !result.IsError();
  }
};

/// Cuts `s` to at most `max` bytes at a UTF-8 character boundary.
std::string_view cut_utf8(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

/// One container being written by quote(): the value and the next member/element to visit.
struct Frame {
  const Value* v;
  rapidjson::SizeType next = 0;
};

/// Writes the scalar `v`, or opens the container `v` (pushing it), through `w`.
void quote_one(const Value& v, rapidjson::Writer<rapidjson::StringBuffer>& w, std::vector<Frame>& stack, size_t max_bytes) {
  if (v.IsObject()) {
    w.StartObject();
    stack.push_back({&v});
  } else if (v.IsArray()) {
    w.StartArray();
    stack.push_back({&v});
  } else if (v.IsString()) {
    auto s = cut_utf8({v.GetString(), v.GetStringLength()}, max_bytes);
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  } else if (v.IsBool()) {
    w.Bool(v.GetBool());
  } else if (v.IsNull()) {
    w.Null();
  } else if (v.IsInt64()) {
    w.Int64(v.GetInt64());
  } else if (v.IsUint64()) {
    w.Uint64(v.GetUint64());
  } else {
    w.Double(v.GetDouble());
  }
}

/// Objects whose duplicate keys are kept as written: tuning refuses a sysctl key given twice in
/// one object, as the reference plugin does (it reads the raw bytes for that), so it must see them.
bool keeps_duplicates(const Value& name) {
  return std::string_view(name.GetString(), name.GetStringLength()) == "sysctl";
}

/// A member's name.
std::string_view name_of(const Value::Member& m) { return {m.name.GetString(), m.name.GetStringLength()}; }

/// Marks in `drop` every member of object `v` whose name a later member repeats; false when no
/// name repeats (then `drop` is untouched). The few members of a typical object are compared
/// pairwise (no allocation); a large object's names are sorted (n log n), so any object is cheap.
bool mark_earlier_duplicates(const Value& v, std::vector<std::pair<std::string_view, rapidjson::SizeType>>& names,
                             std::vector<bool>& drop) {
  const rapidjson::SizeType n = v.MemberCount();
  const auto first = v.MemberBegin();
  constexpr rapidjson::SizeType kPairwise = 16;
  bool any = false;
  if (n <= kPairwise) {
    for (rapidjson::SizeType i = 0; i + 1 < n; ++i) {
      const std::string_view a = name_of(first[i]);
      for (rapidjson::SizeType j = i + 1; j < n; ++j) {
        if (name_of(first[j]) != a) continue;
        if (!any) drop.assign(n, false);
        any = drop[i] = true;
        break;
      }
    }
    return any;
  }
  names.clear();
  for (rapidjson::SizeType i = 0; i < n; ++i) names.emplace_back(name_of(first[i]), i);
  std::sort(names.begin(), names.end());  // equal names adjacent, in member order
  for (size_t k = 0; k + 1 < names.size(); ++k) {
    if (names[k].first != names[k + 1].first) continue;
    if (!any) drop.assign(n, false);
    any = drop[names[k].second] = true;
  }
  return any;
}

}  // namespace

/// Go's encoding/json (libcni, Multus, the reference plugins) keeps the last of duplicate object
/// keys; RapidJSON keeps them all and finds the first. Removes every earlier duplicate, in every
/// object of `root` (but "sysctl" objects: keeps_duplicates), so plumb reads what a Go plugin
/// reads. Iterative (input depth costs no stack) and at most n log n in an object's members.
void keep_last_duplicates(Document& root) {
  std::vector<std::pair<Value*, bool>> pending{{&root, false}};
  std::vector<std::pair<std::string_view, rapidjson::SizeType>> names;
  std::vector<bool> drop;
  while (!pending.empty()) {
    auto [v, as_written] = pending.back();
    pending.pop_back();
    if (v->IsArray()) {
      for (auto& e : v->GetArray()) {
        if (e.IsObject() || e.IsArray()) pending.emplace_back(&e, false);
      }
      continue;
    }
    if (!v->IsObject()) continue;
    if (!as_written && v->MemberCount() > 1 && mark_earlier_duplicates(*v, names, drop)) {
      Value kept(rapidjson::kObjectType);
      for (rapidjson::SizeType i = 0; i < drop.size(); ++i) {
        auto m = v->MemberBegin() + i;
        if (!drop[i]) kept.AddMember(std::move(m->name), std::move(m->value), root.GetAllocator());
      }
      *v = std::move(kept);
    }
    for (auto& m : v->GetObject()) {
      if (m.value.IsObject() || m.value.IsArray()) pending.emplace_back(&m.value, keeps_duplicates(m.name));
    }
  }
}


Result<Document> parse(std::string_view text, const std::string& what, unsigned max_depth) {
  Document d;
  BoundedParse p{text, max_depth, {}, false};
  d.Populate(p);
  if (p.too_deep) {
    return fail(cni_code::kDecode, "cannot decode " + what + ": arrays and objects nested deeper than " +
                                       std::to_string(max_depth) + " levels at offset " + std::to_string(p.result.Offset()));
  }
  if (p.too_big) {
    return fail(cni_code::kDecode, "cannot decode " + what + ": " + rapidjson::GetParseError_En(rapidjson::kParseErrorNumberTooBig) +
                                       " at offset " + std::to_string(p.result.Offset()));
  }
  if (p.result.IsError()) {
    return fail(cni_code::kDecode, "cannot decode " + what + ": " + rapidjson::GetParseError_En(p.result.Code()) +
                                       " at offset " + std::to_string(p.result.Offset()));
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

std::string quote(const Value& v, size_t max_bytes) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  std::vector<Frame> stack;
  quote_one(v, w, stack, max_bytes);
  while (!stack.empty() && sb.GetSize() <= max_bytes) {
    Frame& f = stack.back();
    const bool object = f.v->IsObject();
    const rapidjson::SizeType size = object ? f.v->MemberCount() : f.v->Size();
    if (f.next == size) {
      if (object) {
        w.EndObject();
      } else {
        w.EndArray();
      }
      stack.pop_back();
      continue;
    }
    const rapidjson::SizeType i = f.next++;
    if (object) {
      const auto& m = *(f.v->MemberBegin() + i);
      auto key = cut_utf8({m.name.GetString(), m.name.GetStringLength()}, max_bytes);
      w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
      quote_one(m.value, w, stack, max_bytes);
    } else {
      quote_one((*f.v)[i], w, stack, max_bytes);
    }
  }
  std::string_view out(sb.GetString(), sb.GetSize());
  if (stack.empty() && out.size() <= max_bytes) return std::string(out);
  return std::string(cut_utf8(out, max_bytes)) + "...";
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
