// `plumb daemon --metrics-bind-address=HOST:PORT`: /metrics (the Prometheus text format),
// /healthz and /readyz, served by a process of their own. The HTTP server (civetweb) runs
// threads, and the daemon forks workers at any time: a thread holding a lock at a fork would
// hang the worker, so the server lives in a process the daemon forks at start, which never forks;
// the daemon tells it what happened over a socketpair (one message per invocation, one per change
// of its state). A CNI invocation runs none of this (the server's code is compiled apart, its
// initialisers deferred: CMakeLists.txt).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace plumb::daemon {

/// One request a worker's invocation made to the API server or to etcd (a cache-miss GET, the
/// network-status write, an Event, cluster IPAM), carried to the daemon after the worker's Done
/// (daemon.hpp) and on to the metrics process.
struct RequestSample {
  int32_t etcd = 0;         ///< 0: the Kubernetes API server; 1: etcd
  char verb[12] = {};       ///< API server: "GET", "LIST", "PATCH", "PUT", "POST", "DELETE"; etcd: ""
  char resource[40] = {};   ///< API server: "pods", "pods/status", "events", ...; etcd: "kv/range", ...
  char outcome[12] = {};    ///< "ok" (2xx), "notfound" (404), "conflict" (409), "refused" (another 4xx),
                            ///< "failed" (5xx, others), "unreachable" (no answer)
  int64_t duration_us = 0;  ///< from the request to its answer, µs
};

/// One message from the daemon to its metrics process.
struct MetricsUpdate {
  enum Kind : int32_t { kInvocation = 1, kState = 2, kApiRequest = 3, kWorkerRequest = 4 };
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
  RequestSample request;    ///< kWorkerRequest
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
  /// `kubeconfig`: the daemon's --kubeconfig, whose API server's IPPools /metrics reports ("" =
  /// the in-cluster service account, if any).
  bool start(const std::string& bind, const std::string& kubeconfig);
  /// Whether the metrics process was asked for (it may be down, waiting for its restart).
  [[nodiscard]] bool running() const { return !bind_.empty(); }
  /// The daemon's end of the metrics process's socket, to poll for its end (readable = the process
  /// is gone); -1 while it is down.
  [[nodiscard]] int fd() const { return fd_; }
  /// The metrics process is gone (fd() readable): its port is closed, so a probe of /readyz fails
  /// meanwhile; it is forked again after a back-off (restart()). The daemon reaps the pid.
  void ended();
  /// Forks the metrics process again when it is down and its back-off has passed (1 s, doubled
  /// up to 30 s while it keeps ending within a minute of its start); the daemon's state is sent
  /// again. Returns the milliseconds until it should be called again (-1: not down).
  int restart();
  /// Counts one invocation of `verb` that ended with CNI error `code` (0: success) after `us` µs.
  void invocation(std::string_view verb, unsigned code, int64_t us);
  /// Counts one API server request of the watched caches: `resource` ("pods", "nads",
  /// "ipamclaims"), `verb` ("list", "watch"), `outcome` ("ok", "expired", "error"), `us` µs.
  void api_request(std::string_view resource, std::string_view verb, std::string_view outcome, int64_t us);
  /// Counts one request a worker made (RequestSample).
  void worker_request(const RequestSample& r);
  /// The daemon's state; sent only when it differs from the last one sent.
  void state(const MetricsUpdate& s);

 private:
  bool fork_server();

  int fd_ = -1;
  std::string bind_, kubeconfig_;
  std::chrono::steady_clock::time_point started_{}, next_start_{};
  std::chrono::milliseconds backoff_{1000};
  MetricsUpdate last_{};
  bool sent_state_ = false;
};

namespace detail {

/// Copies `from` into `to`, cut to fit with its NUL (`to` is zeroed).
template <size_t N>
void put(char (&to)[N], std::string_view from) {
  std::memcpy(to, from.data(), from.size() < N - 1 ? from.size() : N - 1);
}

/// The requests one message from a worker carries at most (the rest wait for its next Done).
inline constexpr size_t kMaxRequestSamples = 40;

/// In a worker: collects the requests of its invocations (http::set_request_observer; the
/// clients of the API server and of etcd are observed), kept in memory until they are sent.
void observe_requests();
/// Sends `head` (`size` bytes: a worker's Done) followed by the requests collected since the last
/// call (at most kMaxRequestSamples) as one message on `control`, MSG_NOSIGNAL; true when the whole
/// message went. No syscall but the one send.
bool send_with_requests(int control, const void* head, size_t size);
/// The RequestSample of one observed attempt: `as` "api" or "etcd", the method, the URL, the
/// HTTP status (0: no answer), µs.
[[nodiscard]] RequestSample request_sample(std::string_view as, std::string_view method, std::string_view url,
                                           long status, int64_t us);

/// Whether `bind` is "HOST:PORT" as Metrics::start takes it; the reason in `why` when not.
[[nodiscard]] bool valid_bind_address(const std::string& bind, std::string& why);

/// The metrics process (metrics_server.cpp), in a freshly forked process whose descriptor
/// `updates` is its socket to the daemon: listens on `bind`, sends the daemon '1' (or '0' and
/// the reason on stderr), then applies MetricsUpdate messages until the daemon closes the socket.
/// Serves GET /metrics (text format 0.0.4; with API credentials (k8s::configured(`kubeconfig`)),
/// the whereabouts IPPools' usage, listed at each scrape), /healthz (200 "ok" while the daemon is connected),
/// /readyz (200 "ok" when the daemon listens, has its workers and, with watched caches, they are
/// synced; 503 and what is missing otherwise). Never returns.
[[noreturn]] void metrics_main(int updates, const std::string& bind, const std::string& kubeconfig);

}  // namespace detail

}  // namespace plumb::daemon
