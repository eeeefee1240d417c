#include "engine/base/ip.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace plumb {

Result<IpAddr> IpAddr::parse(std::string_view text) {
  std::string s(text);
  IpAddr a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return fail(cni_code::kInvalidConfig, "invalid IP address \"" + s + "\"");
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == 0 || inet_ntop(family, bytes.data(), buf, sizeof buf) == nullptr) return {};
  return buf;
}

bool IpAddr::is_v4() const { return family == AF_INET; }

IpAddr IpAddr::plus(uint64_t n) const {
  IpAddr r = *this;
  uint64_t carry = n;
  for (int i = static_cast<int>(size()) - 1; i >= 0 && carry != 0; --i) {
    uint64_t v = r.bytes[static_cast<size_t>(i)] + (carry & 0xff);
    carry >>= 8;
    carry += v >> 8;
    r.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(v & 0xff);
  }
  return r;
}

Result<IpPrefix> IpPrefix::parse(std::string_view text, bool allow_bare) {
  auto slash = text.find('/');
  IpPrefix p;
  if (slash == std::string_view::npos) {
    if (!allow_bare) return fail(cni_code::kInvalidConfig, "invalid CIDR \"" + std::string(text) + "\": no prefix length");
    p.addr = PLUMB_TRY(IpAddr::parse(text));
    p.len = static_cast<uint8_t>(p.max_len());
    return p;
  }
  p.addr = PLUMB_TRY(IpAddr::parse(text.substr(0, slash)));
  auto lentext = text.substr(slash + 1);
  unsigned len = 0;
  auto [ptr, ec] = std::from_chars(lentext.data(), lentext.data() + lentext.size(), len);
  if (ec != std::errc{} || ptr != lentext.data() + lentext.size() || lentext.empty() || len > p.max_len()) {
    return fail(cni_code::kInvalidConfig, "invalid CIDR \"" + std::string(text) + "\": bad prefix length");
  }
  p.len = static_cast<uint8_t>(len);
  return p;
}

std::string IpPrefix::str() const {
  std::string out = addr.str();
  char buf[4];
  out += '/';
  out.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<unsigned>(len)).ptr);
  return out;
}

IpPrefix IpPrefix::network() const {
  IpPrefix n = *this;
  for (unsigned bit = len; bit < max_len(); ++bit) {
    n.addr.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  return n;
}

IpAddr IpPrefix::last() const {
  IpAddr a = network().addr;
  for (unsigned bit = len; bit < max_len(); ++bit) {
    a.bytes[bit / 8] |= static_cast<uint8_t>(0x80u >> (bit % 8));
  }
  return a;
}

bool IpPrefix::contains(const IpAddr& a) const {
  if (a.family != addr.family) return false;
  const unsigned bits = std::min<unsigned>(len, max_len()), whole = bits / 8, rest = bits % 8;
  if (std::memcmp(a.bytes.data(), addr.bytes.data(), whole) != 0) return false;
  const auto mask = static_cast<uint8_t>(0xff00u >> rest);
  return rest == 0 || ((a.bytes[whole] ^ addr.bytes[whole]) & mask) == 0;
}

Result<Mac> Mac::parse(std::string_view text) {
  Mac m;
  if (text.size() != 17) return fail(cni_code::kInvalidConfig, "invalid MAC address \"" + std::string(text) + "\"");
  for (size_t i = 0; i < 6; ++i) {
    if (i > 0) {
      char sep = text[i * 3 - 1];
      if (sep != ':' && sep != '-') return fail(cni_code::kInvalidConfig, "invalid MAC address \"" + std::string(text) + "\"");
    }
    unsigned v = 0;
    auto part = text.substr(i * 3, 2);
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + 2, v, 16);
    if (ec != std::errc{} || ptr != part.data() + 2) {
      return fail(cni_code::kInvalidConfig, "invalid MAC address \"" + std::string(text) + "\"");
    }
    m.bytes[i] = static_cast<uint8_t>(v);
  }
  return m;
}

std::string Mac::str() const { return format_hwaddr(bytes.data(), bytes.size()); }

std::string format_hwaddr(const uint8_t* data, size_t len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(len == 0 ? 0 : 3 * len - 1, ':');
  for (size_t i = 0; i < len; ++i) {
    out[3 * i] = kHex[data[i] >> 4];
    out[3 * i + 1] = kHex[data[i] & 0xf];
  }
  return out;
}

std::optional<std::vector<uint8_t>> parse_hwaddr(std::string_view text) {
  // "xx" then ":xx" per further byte: 3n - 1 characters for n bytes.
  if (text.size() % 3 != 2) return std::nullopt;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < text.size(); i += 3) {
    if (i > 0 && text[i - 1] != ':') return std::nullopt;
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + i + 2, v, 16);
    if (ec != std::errc{} || ptr != text.data() + i + 2) return std::nullopt;
    out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

}  // namespace plumb
