// A state record's encoding (state.hpp): format 3 with its integrity trailer written last, and
// the strict reader of formats 1-3.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <string>

#include "engine/base/text.hpp"
#include "engine/state/state.hpp"

namespace plumb::state {
namespace {

/// The trailer's key: the last member of a format-3 record, {"length": <bytes of the body>,
/// "fnv1a64": "<16 hex digits>"}, where the body is the record's text up to the comma before it,
/// closed with '}' (the same record encoded without the trailer).
constexpr std::string_view kIntegrityKey = "integrity";
constexpr std::string_view kIntegrityMark = ",\"integrity\":";

/// `v` as 16 lower-case hex digits ("%016" PRIx64).
std::string hex64(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (size_t i = 16; i-- > 0; v >>= 4) out[i] = kHex[v & 0xf];
  return out;
}

/// Checks the integrity trailer of a format-3 record against its text.
Status check_integrity(std::string_view text, const json::Value& d, const std::string& origin) {
  const json::Value* integrity = json::find(d, kIntegrityKey);
  const auto last = d.MemberCount() == 0 ? d.MemberEnd() : d.MemberEnd() - 1;
  if (integrity == nullptr || !integrity->IsObject() || last == d.MemberEnd() || &last->value != integrity) {
    return fail(cni_code::kDecode, "state record " + origin + " is not whole: its integrity trailer is missing");
  }
  const json::Value* length = json::find(*integrity, "length");
  const json::Value* sum = json::find(*integrity, "fnv1a64");
  const size_t mark = text.rfind(kIntegrityMark);
  if (length == nullptr || !length->IsUint64() || sum == nullptr || !sum->IsString() || mark == std::string_view::npos) {
    return fail(cni_code::kDecode, "state record " + origin + " is not whole: its integrity trailer is malformed");
  }
  // The body: the text up to the trailer's comma, closed with '}' (hashed without a copy).
  const std::string_view head = text.substr(0, mark);
  if (head.size() + 1 != length->GetUint64() || hex64(text::fnv1a64("}", text::fnv1a64(head))) != sum->GetString()) {
    return fail(cni_code::kDecode, "state record " + origin + " is not whole: its length or checksum does not match its content");
  }
  return {};
}

/// Reads the typed fields of a parsed record; every field present must have its type.
class FieldReader {
 public:
  FieldReader(const json::Value& d, const std::string& origin) : d_(d), origin_(origin) {}

  Status str(const char* key, std::string& out, bool required) {
    const json::Value* v = json::find(d_, key);
    if (v == nullptr) return required ? missing(key) : Status{};
    if (!v->IsString()) return wrong(key, "a string", *v);
    out.assign(v->GetString(), v->GetStringLength());
    return {};
  }
  Status boolean(const char* key, bool& out) {
    const json::Value* v = json::find(d_, key);
    if (v == nullptr) return {};
    if (!v->IsBool()) return wrong(key, "a boolean", *v);
    out = v->GetBool();
    return {};
  }
  Status index(int& out) {
    const json::Value* v = json::find(d_, "index");
    if (v == nullptr) return missing("index");
    if (!v->IsInt() || v->GetInt() < 0) return wrong("index", "a non-negative integer", *v);
    out = v->GetInt();
    return {};
  }
  /// A member that must be an array (or null when `nullable`), copied into `out`.
  Status copy(const char* key, json::Document& out, bool array, bool nullable, bool required) {
    auto it = d_.FindMember(key);
    if (it == d_.MemberEnd()) return required ? missing(key) : Status{};
    const json::Value& v = it->value;
    if (!(v.IsNull() && nullable) && !(array ? v.IsArray() : v.IsObject())) {
      return wrong(key, array ? (nullable ? "a list or null" : "a list") : "an object or null", v);
    }
    out.CopyFrom(v, out.GetAllocator());
    return {};
  }

 private:
  Status missing(const char* key) {
    return fail(cni_code::kDecode, "state record " + origin_ + " lacks \"" + key + "\"");
  }
  Status wrong(const char* key, const char* want, const json::Value& v) {
    return fail(cni_code::kDecode, "state record " + origin_ + ": \"" + key + "\" must be " + want + ", got " + json::quote(v, 60));
  }

  const json::Value& d_;
  const std::string& origin_;
};

/// The members of a record this plumb reads and writes (and the trailer).
constexpr std::string_view kKnownMembers[] = {"format", "containerID", "cniIfname", "index", "ifname", "network", "selection",
                                              "default", "podNamespace", "podName", "netns", "phase", "ipamOwner", "disableCheck",
                                              "disableGC", "config", "result", "status", "undo", kIntegrityKey};

/// Copies the members of `d` this plumb does not know into r.extra (a newer plumb's, written back
/// when this one rewrites the record).
void keep_extra(const json::Value& d, AttachmentRecord& r) {
  for (auto it = d.MemberBegin(); it != d.MemberEnd(); ++it) {
    const std::string_view name(it->name.GetString(), it->name.GetStringLength());
    if (std::find(std::begin(kKnownMembers), std::end(kKnownMembers), name) != std::end(kKnownMembers)) continue;
    auto& a = r.extra.GetAllocator();
    if (!r.extra.IsObject()) r.extra.SetObject();
    r.extra.AddMember(json::Value(it->name, a), json::Value(it->value, a), a);
  }
}

Status read_fields(const json::Value& d, const std::string& origin, AttachmentRecord& r) {
  FieldReader f(d, origin);
  const bool v3 = r.format >= 3;
  PLUMB_TRY(f.str("containerID", r.container_id, true));
  PLUMB_TRY(f.str("cniIfname", r.cni_ifname, v3));
  PLUMB_TRY(f.index(r.index));
  PLUMB_TRY(f.str("ifname", r.ifname, true));
  PLUMB_TRY(f.str("network", r.network, true));
  PLUMB_TRY(f.str("selection", r.selection, false));
  PLUMB_TRY(f.str("podNamespace", r.pod_namespace, false));
  PLUMB_TRY(f.str("podName", r.pod_name, false));
  PLUMB_TRY(f.str("netns", r.netns, false));
  PLUMB_TRY(f.str("phase", r.phase, true));
  PLUMB_TRY(f.str("ipamOwner", r.ipam_owner, false));
  PLUMB_TRY(f.boolean("default", r.is_default));
  PLUMB_TRY(f.boolean("disableCheck", r.disable_check));
  PLUMB_TRY(f.boolean("disableGC", r.disable_gc));
  PLUMB_TRY(f.copy("config", r.config, /*array=*/true, /*nullable=*/true, v3));
  PLUMB_TRY(f.copy("result", r.result, /*array=*/false, /*nullable=*/true, false));
  PLUMB_TRY(f.copy("status", r.status, /*array=*/false, /*nullable=*/true, false));
  PLUMB_TRY(f.copy("undo", r.undo, /*array=*/true, /*nullable=*/false, true));
  keep_extra(d, r);
  if (r.phase != "adding" && r.phase != "ready") {
    return fail(cni_code::kDecode, "state record " + origin + ": \"phase\" must be \"adding\" or \"ready\", got \"" + r.phase + "\"");
  }
  return {};
}

}  // namespace

std::string encode(const AttachmentRecord& rec) {
  // Streamed through one writer: no copy of the embedded documents, one pass over them. The
  // bytes are what json::dump gives for the same members in this order.
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto key = [&](std::string_view k) { w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())); };
  auto text_member = [&](std::string_view k, const std::string& v) {
    key(k);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  key("format");
  w.Int(kRecordFormat);
  text_member("containerID", rec.container_id);
  text_member("cniIfname", rec.cni_ifname);
  key("index");
  w.Int(rec.index);
  text_member("ifname", rec.ifname);
  text_member("network", rec.network);
  text_member("selection", rec.selection);
  key("default");
  w.Bool(rec.is_default);
  text_member("podNamespace", rec.pod_namespace);
  text_member("podName", rec.pod_name);
  text_member("netns", rec.netns);
  text_member("phase", rec.phase);
  if (!rec.ipam_owner.empty()) text_member("ipamOwner", rec.ipam_owner);
  if (rec.disable_check) {
    key("disableCheck");
    w.Bool(true);
  }
  if (rec.disable_gc) {
    key("disableGC");
    w.Bool(true);
  }
  key("config");
  rec.config.Accept(w);
  key("result");
  rec.result.Accept(w);
  key("status");
  rec.status.Accept(w);
  key("undo");
  if (rec.undo.IsArray()) {
    rec.undo.Accept(w);
  } else {
    w.StartArray();
    w.EndArray();
  }
  if (rec.extra.IsObject()) {
    for (auto it = rec.extra.MemberBegin(); it != rec.extra.MemberEnd(); ++it) {
      key(std::string_view(it->name.GetString(), it->name.GetStringLength()));
      it->value.Accept(w);
    }
  }
  w.EndObject();
  // The trailer last: the body's length and checksum, so a reader can tell a whole record.
  std::string out(sb.GetString(), sb.GetSize());
  const std::string trailer = std::string(kIntegrityMark) + "{\"length\":" + std::to_string(out.size()) + ",\"fnv1a64\":\"" +
                              hex64(text::fnv1a64(out)) + "\"}}";
  out.pop_back();  // the body's closing brace: the trailer closes the object
  out += trailer;
  return out;
}

Result<AttachmentRecord> decode(std::string_view text, const std::string& origin) {
  json::Document d = PLUMB_TRY(json::parse(text, "state record " + origin, kRecordMaxDepth));
  if (!d.IsObject()) return fail(cni_code::kDecode, "state record " + origin + " is not an object");
  AttachmentRecord r;
  // Records without "format" were written before formats were numbered: format 1, whose fields and
  // undo operations format 2 kept (it added "format" and "ipamOwner"); format 3 added
  // "cniIfname" and the integrity trailer.
  const json::Value* format = json::find(d, "format");
  if (format != nullptr && !format->IsInt()) {
    return fail(cni_code::kDecode, "state record " + origin + ": \"format\" must be an integer, got " + json::quote(*format, 40));
  }
  r.format = format == nullptr ? 1 : format->GetInt();
  if (r.format > kRecordFormat) {
    return fail(cni_code::kNewerRecord, "state record " + origin + " has format " + std::to_string(r.format) +
                                            ", this plumb reads formats 1.." + std::to_string(kRecordFormat) +
                                            " (written by a newer plumb)");
  }
  if (r.format < 1) return fail(cni_code::kDecode, "state record " + origin + " has format " + std::to_string(r.format));
  if (r.format >= 3) PLUMB_TRY(check_integrity(text, d, origin));
  PLUMB_TRY(read_fields(d, origin, r));
  r.origin = origin;
  return r;
}

}  // namespace plumb::state
