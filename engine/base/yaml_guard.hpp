// A gate in front of yaml-cpp: yaml-cpp 0.7 (Debian 12) loops forever on some malformed inputs
// (any document starting with ',' for one, found by tests/fuzz/fuzz_config). Every YAML text
// plumb reads is first checked by libyaml, the reference C parser, with bounded depth and size;
// only well-formed YAML reaches yaml-cpp.
#pragma once

#include <string>
#include <string_view>

#include "engine/base/result.hpp"

namespace plumb::yaml {

/// Limits for untrusted YAML (NADs, pod manifests, kubeconfigs are all small).
inline constexpr size_t kMaxBytes = 4u << 20;   // 4 MiB
inline constexpr int kMaxDepth = 64;            // nesting of collections
inline constexpr size_t kMaxAliases = 1000;     // alias expansions ("billion laughs")

/// Checks that `text` is well-formed YAML (any number of documents) within the limits above.
/// Errors: kDecode naming `origin` and libyaml's problem with its line and column.
[[nodiscard]] Status check(std::string_view text, const std::string& origin);

}  // namespace plumb::yaml
