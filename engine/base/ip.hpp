// IP addresses, prefixes and MAC addresses: the value types every layer shares.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb {

/// An IPv4 or IPv6 address. family is AF_INET or AF_INET6; bytes holds 4 or 16 bytes
/// (network order, the rest zero).
struct IpAddr {
  int family = 0;
  std::array<uint8_t, 16> bytes{};

  /// Parses "192.0.2.1" or "2001:db8::1". Errors: kInvalidConfig naming the text.
  [[nodiscard]] static Result<IpAddr> parse(std::string_view text);
  [[nodiscard]] std::string str() const;
  [[nodiscard]] bool is_v4() const;
  [[nodiscard]] size_t size() const { return is_v4() ? 4 : 16; }
  [[nodiscard]] bool valid() const { return family != 0; }
  /// This address plus `n` (wraps within the family's width).
  [[nodiscard]] IpAddr plus(uint64_t n) const;
  auto operator<=>(const IpAddr&) const = default;
};

/// An address with a prefix length: "192.0.2.5/24". `addr` keeps host bits (an interface
/// address); network() clears them.
struct IpPrefix {
  IpAddr addr;
  uint8_t len = 0;

  /// Parses "addr/len". With allow_bare, "addr" alone means a host prefix (/32 or /128).
  /// Errors: kInvalidConfig naming the text.
  [[nodiscard]] static Result<IpPrefix> parse(std::string_view text, bool allow_bare = false);
  [[nodiscard]] std::string str() const;
  [[nodiscard]] IpPrefix network() const;
  [[nodiscard]] bool contains(const IpAddr& a) const;
  /// Last address of the prefix (the broadcast address for IPv4).
  [[nodiscard]] IpAddr last() const;
  [[nodiscard]] unsigned max_len() const { return addr.is_v4() ? 32 : 128; }
  auto operator<=>(const IpPrefix&) const = default;
};

/// A 6-byte Ethernet hardware address.
struct Mac {
  std::array<uint8_t, 6> bytes{};
  /// Parses "02:11:22:33:44:55" (also '-' separated). Errors: kInvalidConfig naming the text.
  [[nodiscard]] static Result<Mac> parse(std::string_view text);
  /// Lower-case colon form.
  [[nodiscard]] std::string str() const;
  auto operator<=>(const Mac&) const = default;
};

/// Formats any hardware address as lower-case colon-separated hex (IPoIB addresses are 20 bytes).
[[nodiscard]] std::string format_hwaddr(const uint8_t* data, size_t len);
/// Parses format_hwaddr()'s form back: one or more two-digit hex bytes separated by ':' (either
/// case), any count (GUIDs are 8 bytes, IPoIB addresses 20). nullopt when the text is not that.
[[nodiscard]] std::optional<std::vector<uint8_t>> parse_hwaddr(std::string_view text);

}  // namespace plumb
