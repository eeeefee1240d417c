// Unary gRPC calls (grpc.hpp): the 5-byte message prefix and the status fields; HTTP/2 is libcurl's.
#include "engine/base/grpc.hpp"

#include <curl/curl.h>

#include <charconv>
#include <cstdint>

namespace plumb::grpc {
namespace {

constexpr size_t kPrefixBytes = 5;  // compressed flag (1) + big-endian length (4)

/// grpc-message is percent-encoded (PROTOCOL-HTTP2): libcurl's unescape decodes it.
std::string unescape(const std::string& text) {
  int len = 0;
  char* out = curl_easy_unescape(nullptr, text.c_str(), static_cast<int>(text.size()), &len);
  if (out == nullptr) return text;
  std::string s(out, static_cast<size_t>(len));
  curl_free(out);
  return s;
}

/// The one message of a successful answer's body.
Result<std::string> unframe(const std::string& body, const std::string& what) {
  if (body.size() < kPrefixBytes) {
    return fail(cni_code::kIo, what + ": the answer has no gRPC message (" + std::to_string(body.size()) + " bytes)");
  }
  const auto* b = reinterpret_cast<const unsigned char*>(body.data());
  if (b[0] != 0) return fail(cni_code::kIo, what + ": the answer is compressed, which plumb did not ask for");
  const uint32_t len = (uint32_t{b[1]} << 24) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 8) | uint32_t{b[4]};
  if (len != body.size() - kPrefixBytes) {
    return fail(cni_code::kIo, what + ": the answer is not one gRPC message (prefix says " + std::to_string(len) +
                                   " bytes, " + std::to_string(body.size() - kPrefixBytes) + " follow)");
  }
  return body.substr(kPrefixBytes);
}

}  // namespace

Result<std::string> frame(std::string_view message) {
  if (message.size() > UINT32_MAX) return fail(cni_code::kInvalidConfig, "gRPC message of " + std::to_string(message.size()) + " bytes is too large");
  const auto len = static_cast<uint32_t>(message.size());
  std::string out;
  out.reserve(kPrefixBytes + message.size());
  out.push_back('\0');  // not compressed
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((len >> shift) & 0xff));
  out.append(message);
  return out;
}

Result<Reply> unary(http::Client& client, const std::string& base_url, const std::string& method,
                    std::string_view request) {
  http::Request req;
  req.method = "POST";
  req.url = base_url + method;
  req.content_type = "application/grpc";
  req.headers = {"te: trailers"};
  req.body = PLUMB_TRY(frame(request));
  req.want_headers = {"grpc-status", "grpc-message"};
  const std::string what = "gRPC " + method;
  auto resp = client.send(req);
  if (!resp) return std::unexpected(resp.error());
  if (resp->status != 200) {
    return fail(cni_code::kIo, what + ": HTTP status " + std::to_string(resp->status) + ", not a gRPC answer");
  }
  auto st = resp->headers.find("grpc-status");
  if (st == resp->headers.end()) return fail(cni_code::kIo, what + ": the answer has no grpc-status");
  Reply r;
  const std::string& text = st->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), r.status);
  if (ec != std::errc{} || end != text.data() + text.size() || r.status < 0) {
    return fail(cni_code::kIo, what + ": grpc-status \"" + text + "\" is not a status code");
  }
  if (auto m = resp->headers.find("grpc-message"); m != resp->headers.end()) r.message = unescape(m->second);
  if (r.status == code::kOk) r.payload = PLUMB_TRY(unframe(resp->body, what));
  return r;
}

}  // namespace plumb::grpc
