#include "engine/base/base64.hpp"

#include <array>
#include <cstdint>

namespace plumb::base64 {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr int8_t kPad = -2;
constexpr int8_t kInvalid = -1;

/// Value of every byte in the alphabet, kPad for '=', kInvalid for the rest.
constexpr std::array<int8_t, 256> make_values() {
  std::array<int8_t, 256> v{};
  for (auto& x : v) x = kInvalid;
  for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  v['='] = kPad;
  return v;
}
constexpr std::array<int8_t, 256> kValues = make_values();

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

}  // namespace

std::string encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(data[i])) << 16 |
                 static_cast<uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8 |
                 static_cast<unsigned char>(data[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(n >> shift) & 63]);
  }
  if (size_t rest = data.size() - i; rest > 0) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(data[i])) << 16;
    if (rest == 2) n |= static_cast<uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> decode(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return fail(cni_code::kDecode, "cannot decode " + std::string(what) + ": " + why);
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t quad = 0;  // sextets of the group being read
  int have = 0;       // characters of the group read so far
  int pad = 0;        // '=' seen (only at the end of the last group)
  size_t chars = 0;
  for (char c : text) {
    if (is_space(c)) continue;
    ++chars;
    int8_t v = kValues[static_cast<unsigned char>(c)];
    if (v == kInvalid) return bad("invalid base64 character at position " + std::to_string(chars));
    if (v == kPad) {
      if (have < 2) return bad("misplaced base64 padding");
      ++pad;
    } else if (pad > 0) {
      return bad("base64 data after padding");
    }
    quad = quad << 6 | static_cast<uint32_t>(v == kPad ? 0 : v);
    if (++have < 4) continue;
    out.push_back(static_cast<char>(quad >> 16));
    if (pad < 2) out.push_back(static_cast<char>(quad >> 8 & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(quad & 0xff));
    quad = 0;
    have = 0;
    if (pad > 0) pad = 3;  // a further group after a padded one is an error (caught above)
  }
  if (have != 0) return bad("base64 length " + std::to_string(chars) + " is not a multiple of 4");
  return out;
}

}  // namespace plumb::base64
