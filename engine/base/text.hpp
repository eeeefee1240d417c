// Small text helpers every layer shares.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plumb::text {

/// Removes leading and trailing ASCII white space (Go's strings.TrimSpace for ASCII: what the
/// reference plugins apply to ids and file contents).
[[nodiscard]] std::string_view trim(std::string_view s);

/// Splits `s` at every `sep` (empty pieces kept): "a,,b" -> {"a", "", "b"}.
[[nodiscard]] std::vector<std::string_view> split(std::string_view s, char sep);

/// FNV-1a hashes: stable across builds and machines (unlike std::hash), for names and starting
/// points derived from text.
[[nodiscard]] uint32_t fnv1a32(std::string_view s);
[[nodiscard]] uint64_t fnv1a64(std::string_view s);

}  // namespace plumb::text
