// plumb's one HTTP client, on libcurl: the Kubernetes API client (cni-entry/source/kube.cpp) and
// the etcd v3 JSON-gateway client (ipam/etcd_client.cpp) both use it.
//
// One easy handle per Client, reused across requests, so a connection (and its TLS session)
// stays open between requests of one invocation. libcurl is dlopen()ed the first time a Client
// sends something (engine/base/lazy_libs.cpp), never by constructing one: a pod ADD that makes
// no HTTP request does not pay for loading it.
//
// Failures come back as plumb::Error and are never logged here. Transport failures are
// classified by cni_code:
//   kTryAgainLater   transient: cannot resolve/connect, timeout (sys_errno ETIMEDOUT), reset, empty reply, TLS
//                    handshake aborted; worth retrying
//   kInvalidConfig   TLS set-up or verification failed (bad CA, certificate rejected, bad key):
//                    retrying cannot help
//   kIo              any other transport failure
//   kInternal        libcurl cannot be loaded or cannot create a handle
// Every message starts with "<METHOD> <URL>: "; `details` carries libcurl's own text.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::http {

/// TLS settings. A PEM given as data wins over the file of the same role.
struct Tls {
  std::string ca_file;                // PEM CA bundle verifying the server; "" with no ca_pem = system CAs
  std::string ca_pem;                 // PEM CA bundle as data
  std::string cert_file;              // PEM client certificate for mutual TLS; "" = none
  std::string cert_pem;               // client certificate as data
  std::string key_file;               // PEM key of the client certificate
  std::string key_pem;                // key as data
  bool insecure_skip_verify = false;  // neither the server's certificate nor its name is checked
};

/// Bounded retry: at most `max_attempts` attempts, and (when `budget` > 0) no new attempt once
/// `budget` has passed since the first. Before each retry retry() waits `backoff`, doubled
/// after every wait up to `backoff_max`; a wait never runs past the budget.
struct RetryPolicy {
  int max_attempts = 4;                         // 1 = no retry
  std::chrono::milliseconds backoff{500};       // wait before the first retry
  std::chrono::milliseconds backoff_max{4000};  // cap of the doubled wait
  std::chrono::milliseconds budget{0};          // total time for all attempts; 0 = no time limit
};

/// How a Client talks to its server(s).
struct Options {
  Tls tls;
  std::chrono::milliseconds timeout{30000};      // one attempt, connection set-up included
  std::chrono::milliseconds connect_timeout{0};  // connection set-up alone; 0 = `timeout`
  RetryPolicy retry;                             // what request() does on transient failures
  std::string peer = "the server";               // named in messages: "<peer> cannot be reached"
  std::string unix_socket;                       // connect to this unix socket instead of the URL's host ("" = TCP)
  bool http2_prior_knowledge = false;            // speak HTTP/2 from the first byte (h2c, e.g. gRPC over a unix
                                                 // socket); each request then opens its own connection
  const char* observed_as =
      nullptr;  // who the peer is for the process's RequestObserver ("api", "etcd"); nullptr = not told
};

/// One request.
struct Request {
  std::string method = "GET";
  std::string url;                        // absolute http:// or https:// URL, query included
  std::vector<std::string> headers;       // extra "Name: value" lines (no CR/LF inside)
  std::string body;                       // sent unless method is GET or HEAD
  std::string content_type;               // Content-Type of `body`; "" = none
  std::vector<std::string> want_headers;  // response headers or trailers to return (names, any case)
  /// When set, the body is handed over here as it arrives instead of kept in Response::body (a
  /// Kubernetes watch); returning false ends the transfer, and send() returns the Response
  /// (status and headers, empty body) as for a complete one.
  /// `status` is the answer's HTTP status.
  std::function<bool(long status, std::string_view chunk)> on_body;
};

/// One answer, whatever its status.
struct Response {
  long status = 0;  // HTTP status code
  std::string body;
  std::map<std::string, std::string> headers;  // the wanted headers (and trailers) present, by lower-case name
};

/// True for the HTTP statuses worth retrying: 429, 500, 502, 503, 504.
[[nodiscard]] bool transient_status(long status);

/// The standard reason phrase of the statuses plumb reports ("Not Found"); "" for others.
[[nodiscard]] std::string_view reason_phrase(long status);

/// What one attempt of a retried operation came to.
enum class Verdict {
  Done,      // finished (succeeded or failed for good): stop
  Retry,     // transient failure: wait the back-off, then try again
  RetryNow,  // try again at once (e.g. on another endpoint, or after authenticating)
};

/// How a retried operation went.
struct RetryStats {
  int attempts = 0;        // attempts made
  bool exhausted = false;  // the last attempt still asked for a retry when the budget ran out
  std::chrono::milliseconds elapsed{};
};

/// Calls `attempt` until it returns Verdict::Done or `policy` allows no further attempt,
/// sleeping the back-off before each Verdict::Retry. Always makes at least one attempt.
/// `attempt` keeps its own result; this only counts and waits.
RetryStats retry(const RetryPolicy& policy, const std::function<Verdict()>& attempt);

/// One attempt of a Client whose Options::observed_as is set, as the process's observer sees it.
struct Observed {
  std::string_view as;      // Options::observed_as
  std::string_view method;  // "GET", "PATCH", ...
  std::string_view url;     // the request's URL, query included
  long status;              // the answer's HTTP status; 0 when no answer came
  std::chrono::nanoseconds took;
};
/// Told of each attempt (after it); called on the sending thread, must not block.
using RequestObserver = void (*)(const Observed&);
/// Installs the process's observer (nullptr: none, the default). plumb daemon's workers count the
/// requests of their invocations with it (cni-entry/daemon/metrics.hpp); a Client without
/// observed_as, or with no observer installed, reads no clock for it.
void set_request_observer(RequestObserver fn);

/// An HTTP client: one libcurl easy handle (keep-alive across requests). Not thread-safe.
class Client {
 public:
  /// Stores the options; loads nothing and connects nowhere (the first request does).
  explicit Client(Options opts);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// One attempt, no retry. Any HTTP status is a Response; errors are transport failures
  /// classified as in the file comment, plus kInvalidConfig for a header with a line break.
  [[nodiscard]] Result<Response> send(const Request& req);

  /// send() retried under `policy` (Options::retry when omitted) while it fails with
  /// kTryAgainLater or answers a transient_status(). When the budget runs out the last answer
  /// is returned as it is (a Response for a transient status); a transient transport error then
  /// gets " (<n> attempts, <timeout> ms timeout each)" appended to its message.
  [[nodiscard]] Result<Response> request(const Request& req);
  [[nodiscard]] Result<Response> request(const Request& req, const RetryPolicy& policy);

  /// Attempts (send() calls) made so far, for cost checks and tests.
  [[nodiscard]] uint64_t attempts() const { return attempts_; }
  [[nodiscard]] const Options& options() const { return opts_; }

 private:
  [[nodiscard]] Result<Response> attempt(const Request& req);

  Options opts_;
  void* curl_ = nullptr;  // CURL*, created by the first send()
  uint64_t attempts_ = 0;
};

}  // namespace plumb::http
