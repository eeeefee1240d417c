// Unary gRPC calls over plumb's one HTTP client (engine/base/http.hpp, libcurl), for kubelet's
// pod-resources API on a unix socket (cni-entry/source/kubelet.hpp).
//
// gRPC over HTTP/2 ("PROTOCOL-HTTP2" of the gRPC repository) for one unary call is: a POST to
// /<package>.<Service>/<Method> with "content-type: application/grpc" and "te: trailers", whose
// body is one length-prefixed message (a 1-byte compressed flag, then a 4-byte big-endian length,
// then the serialized protobuf message); the answer is HTTP 200 with one length-prefixed message
// and the trailers grpc-status (a decimal code, 0 = OK) and grpc-message (percent-encoded text),
// or, for an error without a message, those two as plain headers ("trailers-only"). libcurl
// speaks the HTTP/2 (nghttp2) and hands trailers over like headers; this file adds the 5-byte
// prefix and reads the two status fields. Encoding and decoding the messages themselves is the
// caller's (protobuf generated code): nothing here knows protobuf.
#pragma once

#include <string>
#include <string_view>

#include "engine/base/http.hpp"
#include "engine/base/result.hpp"

namespace plumb::grpc {

/// The gRPC status codes plumb acts on (the full list is in gRPC's statuscodes.md).
namespace code {
inline constexpr int kOk = 0;
inline constexpr int kUnknown = 2;
inline constexpr int kDeadlineExceeded = 4;
inline constexpr int kNotFound = 5;
inline constexpr int kUnimplemented = 12;
inline constexpr int kUnavailable = 14;
}  // namespace code

/// The outcome of a call that reached the server.
struct Reply {
  int status = code::kOk;  ///< grpc-status
  std::string message;     ///< grpc-message, percent-decoded ("" when absent)
  std::string payload;     ///< the response message (serialized protobuf) when status is kOk
};

/// The request body of a unary call: `message` behind its 5-byte prefix (uncompressed).
/// Errors: kInvalidConfig when the message exceeds 4 GiB - 1.
[[nodiscard]] Result<std::string> frame(std::string_view message);

/// Calls `method` ("/v1.PodResourcesLister/Get") on `client` with the serialized `request`, once
/// (no retry: the client's timeout bounds it). `base_url` is "http://<authority>" (the authority
/// only names the server: the client's Options::unix_socket says where it is; the client must
/// have Options::http2_prior_knowledge). A reply is returned whatever its grpc-status.
/// Errors: the transport's (http.hpp: kTryAgainLater for a refused or timed-out connection ...);
/// kIo naming the method for an answer that is not gRPC (HTTP status other than 200, no
/// grpc-status, a body that is not exactly one uncompressed length-prefixed message).
[[nodiscard]] Result<Reply> unary(http::Client& client, const std::string& base_url, const std::string& method,
                                  std::string_view request);

}  // namespace plumb::grpc
