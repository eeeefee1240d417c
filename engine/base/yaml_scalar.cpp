#include "engine/base/yaml_scalar.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include "engine/base/text.hpp"

namespace plumb::yaml {
namespace {

constexpr std::array<std::string_view, 5> kNull = {"", "~", "null", "Null", "NULL"};
constexpr std::array<std::string_view, 11> kTrue = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"};
constexpr std::array<std::string_view, 11> kFalse = {"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"};
constexpr std::array<std::string_view, 12> kNonFinite = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                                                          "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"};

bool one_of(std::string_view s, const auto& list) { return std::find(list.begin(), list.end(), s) != list.end(); }
bool digits(std::string_view s, int base) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [base](char c) {
    if (base == 16) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return c >= '0' && c < static_cast<char>('0' + base);
  });
}

/// An integer: [-+]?([0-9]+|0x[0-9a-fA-F]+|0o[0-7]+|0b[01]+); int64, else uint64 (non-negative).
/// False when `s` has not that form or does not fit either.
bool resolve_int(std::string_view s, Scalar& out) {
  const bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
    base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
    s.remove_prefix(2);
  }
  if (!digits(s, base)) return false;
  uint64_t u = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), u, base);
  if (ec != std::errc{} || end != s.data() + s.size()) return false;
  if (negative) {
    if (u > static_cast<uint64_t>(INT64_MAX) + 1) return false;
    out = Scalar{ScalarKind::kInt, false, u == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(u)};
  } else if (u <= static_cast<uint64_t>(INT64_MAX)) {
    out = Scalar{ScalarKind::kInt, false, static_cast<int64_t>(u)};
  } else {
    out = Scalar{ScalarKind::kUint, false, 0, u};
  }
  return true;
}

/// A decimal float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, finite.
bool resolve_float(std::string_view s, Scalar& out) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);  // parse_decimal takes no '+'
  auto d = text::parse_decimal(s);
  if (!d) return false;  // not a decimal, or out of range: a string, as go-yaml v2
  out = Scalar{ScalarKind::kFloat, false, 0, 0, *d};
  return true;
}

const char* kind_name(ScalarKind k) {
  switch (k) {
    case ScalarKind::kNull: return "null";
    case ScalarKind::kBool: return "bool";
    case ScalarKind::kInt:
    case ScalarKind::kUint: return "int";
    case ScalarKind::kFloat:
    case ScalarKind::kNonFinite: return "float";
    case ScalarKind::kString: break;
  }
  return "str";
}

}  // namespace

Scalar resolve_plain(std::string_view text) {
  Scalar r;
  if (one_of(text, kNull)) return Scalar{ScalarKind::kNull};
  if (one_of(text, kTrue)) return Scalar{ScalarKind::kBool, true};
  if (one_of(text, kFalse)) return Scalar{ScalarKind::kBool, false};
  if (one_of(text, kNonFinite)) return Scalar{ScalarKind::kNonFinite};
  if (resolve_int(text, r) || resolve_float(text, r)) return r;
  return Scalar{ScalarKind::kString};
}

Result<json::Value> scalar_value(std::string_view text, std::string_view tag, bool quoted, json::Document::AllocatorType& alloc) {
  const bool as_string = tag == "str" || tag == "binary" || tag == "!" || (quoted && tag.empty());
  Scalar r = as_string ? Scalar{ScalarKind::kString} : resolve_plain(text);
  const json::Value quoted_text(rapidjson::StringRef(text.data(), static_cast<rapidjson::SizeType>(text.size())));
  if (tag == "int" || tag == "float" || tag == "bool" || tag == "null") {
    if (tag == "float" && r.kind == ScalarKind::kInt) r = Scalar{ScalarKind::kFloat, false, 0, 0, static_cast<double>(r.i)};
    if (tag != kind_name(r.kind)) return fail(cni_code::kDecode, "!!" + std::string(tag) + " " + json::quote(quoted_text) + " is not a YAML " + std::string(tag));
  }
  switch (r.kind) {
    case ScalarKind::kNull: return json::Value();
    case ScalarKind::kBool: return json::Value(r.b);
    case ScalarKind::kInt: return json::Value(r.i);
    case ScalarKind::kUint: return json::Value(r.u);
    case ScalarKind::kFloat: return json::Value(r.d);
    case ScalarKind::kNonFinite:
      return fail(cni_code::kDecode, std::string(text) + " is not a number JSON can hold (no infinity or NaN)");
    case ScalarKind::kString: break;
  }
  return json::Value(text.data(), static_cast<rapidjson::SizeType>(text.size()), alloc);
}

}  // namespace plumb::yaml
