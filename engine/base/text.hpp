// Small text helpers every layer shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace plumb::text {

/// Removes leading and trailing ASCII white space (Go's strings.TrimSpace for ASCII: what the
/// reference plugins apply to ids and file contents).
[[nodiscard]] std::string_view trim(std::string_view s);

/// Splits `s` at every `sep` (empty pieces kept): "a,,b" -> {"a", "", "b"}.
[[nodiscard]] std::vector<std::string_view> split(std::string_view s, char sep);

/// `s` as a double when it is a decimal number and nothing else: an optional '-', digits with at
/// most one '.', an optional exponent ("-1.5", ".5", "2e3", "1E-7"); no white space, '+' sign,
/// hexadecimal, inf or nan. nullopt otherwise, and when out of double's range (overflow, or a
/// non-zero number that underflows to zero; subnormal results are kept). strtod(3) in the "C"
/// locale, which plumb never changes (std::from_chars for double would link libm for libstdc++'s
/// rounding-mode guard, a library loaded on every exec for nothing else).
[[nodiscard]] std::optional<double> parse_decimal(std::string_view s);

/// FNV-1a hashes: stable across builds and machines (unlike std::hash), for names and starting
/// points derived from text.
[[nodiscard]] uint32_t fnv1a32(std::string_view s);
[[nodiscard]] uint64_t fnv1a64(std::string_view s);
/// The FNV-1a 64 of a text whose first part had the hash `prefix_hash`, continued over `s`, its
/// rest: fnv1a64(a + b) == fnv1a64(b, fnv1a64(a)).
[[nodiscard]] uint64_t fnv1a64(std::string_view s, uint64_t prefix_hash);

/// The current time as Kubernetes writes timestamps (RFC 3339, UTC, seconds): "2026-01-02T03:04:05Z".
[[nodiscard]] std::string utc_now_rfc3339();

}  // namespace plumb::text
