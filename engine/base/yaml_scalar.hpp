// How a YAML scalar becomes a JSON value (yaml.hpp lists the rules): shared by the loader, which
// types what it reads, and the emitter, which quotes a string whose plain form would read back as
// something else.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::yaml {

enum class ScalarKind { kNull, kBool, kInt, kUint, kFloat, kNonFinite, kString };

/// A resolved scalar; the number or boolean is in the member its kind names.
struct Scalar {
  ScalarKind kind = ScalarKind::kString;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
};

/// What a plain (unquoted, untagged) scalar `text` means (go-yaml v2's resolution, yaml.hpp).
[[nodiscard]] Scalar resolve_plain(std::string_view text);

/// Types a scalar event's `text` by its `tag` (the short form: "str", "int", ...; "" untagged,
/// "!" non-specific) and whether it was `quoted`. Errors: kDecode (its msg without origin or
/// position, the caller adds them) for .inf/.nan and a tag the text does not fit.
[[nodiscard]] Result<json::Value> scalar_value(std::string_view text, std::string_view tag, bool quoted,
                                               json::Document::AllocatorType& alloc);

}  // namespace plumb::yaml
