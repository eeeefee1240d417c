#include "engine/base/text.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

namespace plumb::text {
namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }
}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_decimal(std::string_view s) {
  std::string_view body = s;
  if (!body.empty() && body.front() == '-') body.remove_prefix(1);
  const size_t e = body.find_first_of("eE");
  const std::string_view mantissa = body.substr(0, e);
  size_t digits = 0, dots = 0;
  for (char c : mantissa) {
    if (c >= '0' && c <= '9') ++digits;
    else if (c == '.') ++dots;
    else return std::nullopt;
  }
  if (digits == 0 || dots > 1) return std::nullopt;
  if (e != std::string_view::npos) {
    std::string_view exp = body.substr(e + 1);
    if (!exp.empty() && (exp.front() == '-' || exp.front() == '+')) exp.remove_prefix(1);
    if (exp.empty() || exp.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  }
  const std::string text(s);
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  // ERANGE: overflow (±HUGE_VAL) or underflow; a subnormal result is a value, zero is not.
  if (errno == ERANGE && (std::isinf(d) || d == 0)) return std::nullopt;
  return d;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

uint32_t fnv1a32(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

uint64_t fnv1a64(std::string_view s) { return fnv1a64(s, 14695981039346656037ull); }

uint64_t fnv1a64(std::string_view s, uint64_t prefix_hash) {
  uint64_t h = prefix_hash;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string utc_now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace plumb::text
