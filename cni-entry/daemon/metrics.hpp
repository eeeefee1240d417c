// `plumb daemon --metrics-bind-address=HOST:PORT`: /metrics (the Prometheus text format),
// /healthz and /readyz, served by a process of their own. The HTTP server (civetweb) runs
// threads, and the daemon forks workers at any time: a thread holding a lock at a fork would
// hang the worker, so the server lives in a process the daemon forks at start, which never forks;
// the daemon tells it what happened over a socketpair (one message per invocation, one per change
// of its state). A CNI invocation runs none of this (the server's code is compiled apart, its
// initialisers deferred: CMakeLists.txt).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace plumb::daemon {

/// One message from the daemon to its metrics process.
struct MetricsUpdate {
  enum Kind : int32_t { kInvocation = 1, kState = 2, kApiRequest = 3 };
  Kind kind = kState;
  char verb[12] = {};       ///< kInvocation: CNI_COMMAND ("ADD"); kApiRequest: "list", "watch". NUL-terminated
  char resource[16] = {};   ///< kApiRequest: "pods", "nads", "ipamclaims"
  char outcome[12] = {};    ///< kApiRequest: "ok", "expired", "error"
  int32_t code = 0;         ///< kInvocation: the CNI error code, 0 on success
  int64_t duration_us = 0;  ///< kInvocation: how long the worker ran it; kApiRequest: the request; µs
  int32_t busy = 0;         ///< kState: workers serving an invocation
  int32_t idle = 0;         ///< kState: warm workers waiting for one
  int32_t listening = 0;    ///< kState: 1 while the daemon accepts connections on its socket
  int32_t workers_up = 0;   ///< kState: 1 when the daemon has all its warm workers
  int32_t watching = 0;     ///< kState: 1 when the daemon keeps watched caches
  int32_t synced = 0;       ///< kState: 1 when every watched collection has been listed
};

/// The daemon's end of its metrics process.
class Metrics {
 public:
  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;
  ~Metrics();

  /// Forks the metrics process serving on `bind` ("HOST:PORT": an IPv4 address, or an IPv6 one in
  /// brackets, and a port 1-65535) and waits until it listens. False, with the reason on stderr
  /// naming --metrics-bind-address and its value, when `bind` is malformed or cannot be bound.
  bool start(const std::string& bind);
  /// Whether the metrics process was started.
  [[nodiscard]] bool running() const { return fd_ >= 0; }
  /// Counts one invocation of `verb` that ended with CNI error `code` (0: success) after `us` µs.
  void invocation(std::string_view verb, unsigned code, int64_t us);
  /// Counts one API server request of the watched caches: `resource` ("pods", "nads",
  /// "ipamclaims"), `verb` ("list", "watch"), `outcome` ("ok", "expired", "error"), `us` µs.
  void api_request(std::string_view resource, std::string_view verb, std::string_view outcome, int64_t us);
  /// The daemon's state; sent only when it differs from the last one sent.
  void state(const MetricsUpdate& s);

 private:
  int fd_ = -1;
  MetricsUpdate last_{};
  bool sent_state_ = false;
};

namespace detail {

/// Whether `bind` is "HOST:PORT" as Metrics::start takes it; the reason in `why` when not.
[[nodiscard]] bool valid_bind_address(const std::string& bind, std::string& why);

/// The metrics process (metrics_server.cpp), in a freshly forked process whose descriptor
/// `updates` is its socket to the daemon: listens on `bind`, sends the daemon '1' (or '0' and
/// the reason on stderr), then applies MetricsUpdate messages until the daemon closes the socket.
/// Serves GET /metrics (text format 0.0.4), /healthz (200 "ok" while the daemon is connected),
/// /readyz (200 "ok" when the daemon listens, has its workers and, with watched caches, they are
/// synced; 503 and what is missing otherwise). Never returns.
[[noreturn]] void metrics_main(int updates, const std::string& bind);

}  // namespace detail

}  // namespace plumb::daemon
