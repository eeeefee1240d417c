// `plumb daemon`: plumb kept warm on the node ("thick" mode, as Multus's multus-daemon). A runtime
// executes plumb-shim (cni-entry/shim/) as the CNI plugin; the shim hands each invocation to the
// daemon over a unix socket (wire.hpp), and one of the daemon's worker processes runs it with the
// same code, from the same entry point, as an exec'd plumb: the shim's descriptors as its
// standard ones, the shim's CNI_* variables as its environment, its exit code the shim's.
//
// A worker serves one invocation at a time and many in its life (256 by default), which is what
// it saves: no exec, no dynamic linking, and page tables, heap and the node namespace's netlink
// sockets already warm. Between invocations it closes everything the last one opened in other
// namespaces. A worker that dies or is killed (the daemon kills the worker of a shim that ended
// before its answer, as a runtime's kill ends an exec'd plumb) is replaced; the journal undoes
// what it had begun on the next verb, as for a killed plumb.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/daemon/pod_events.hpp"
#include "cni-entry/daemon/wire.hpp"

namespace plumb::daemon {

/// The CNI plugin's entry point a worker runs with the request's descriptors in place
/// (cni-entry/main.cpp's): reads the CNI_* variables through `getenv_fn` (the request's, not the
/// process's environment) and returns the process's exit code.
using CniMain = int (*)(const char* (*getenv_fn)(const char*));

/// The command line of `plumb daemon` (cni-entry/cli/cli.cpp fills it).
struct Options {
  std::string socket = daemon_wire::kDefaultSocket;  ///< --socket: where plumb-shim connects
  int workers = 4;                ///< --workers: warm worker processes kept (1-256)
  int requests_per_worker = 256;  ///< --requests-per-worker: invocations before a worker is replaced (1-1000000)
  std::string usage_log;          ///< --usage-log: where each invocation's resource use is appended ("" = nowhere)
  /// --kubeconfig: the API server whose pods (of `node_name`), NADs and IPAMClaims the daemon
  /// watches for its workers ("" = the in-cluster service account when there is one; neither:
  /// no cache, every read is a GET as in thin mode).
  std::string kubeconfig;
  std::string node_name;  ///< --node-name (default $NODE_NAME): whose pods are watched; "" = no cache
  /// --cni-config: plumb's conflist on the node, whose plumb-shim plugin is plumb's configuration
  /// for the pod jobs of the watched pods (hot-plug, the release of a deleted pod's addresses: pod_jobs.hpp).
  std::string cni_config = "/etc/cni/net.d/00-plumb.conflist";
  bool json_log = false;  ///< --log-format=json: the invocations' lines as JSON objects (else text)
  /// --metrics-bind-address: "HOST:PORT" where /metrics, /healthz and /readyz are served
  /// (metrics.hpp); "" = not served.
  std::string metrics_bind_address;
  /// Observers of the node's pods as the watch sees them (pod_events.hpp; not owned), told on
  /// the daemon's thread; none without watched caches.
  std::vector<PodEvents*> pod_observers;
};

/// What one invocation came to, for the line the daemon's stderr gets per invocation.
struct Outcome {
  std::string verb;                   ///< CNI_COMMAND
  std::string pod;                    ///< "namespace/name" from CNI_ARGS ("" = none)
  std::string container;              ///< CNI_CONTAINERID
  std::string ifname;                 ///< CNI_IFNAME
  std::vector<std::string> networks;  ///< the networks it worked on ("default/blue")
  unsigned code = 0;                  ///< the CNI error code, 0 on success
  std::string error;                  ///< the CNI error's text ("" on success)
};

/// Called by the CniMain a worker runs (cni-entry/main.cpp) before it returns: the invocation's
/// outcome, logged by the worker with its duration once the shim has its answer. Does nothing
/// outside a worker.
void note_outcome(Outcome o);

/// `plumb daemon`: listens on `o.socket` (its directory is created 0755 and must pass
/// daemon_wire::socket_dir_trust (socket_dir.hpp) for root and the daemon's uid; the socket is 0600
/// and answers only peers of uid 0 or the daemon's own), says so on stderr with plumb's version, keeps
/// `o.workers` warm worker processes, each replaced after `o.requests_per_worker` invocations; an
/// invocation that finds none idle gets a worker forked for it alone (no invocation waits behind
/// another), and runs until SIGTERM or SIGINT: then it stops accepting, lets the invocations it
/// accepted finish and returns 0. With a usage log, one line per invocation is appended there:
/// the worker's pid, the exit code or wait status, the CPU time (µs) and minor faults of the
/// invocation, the worker's peak RSS (KiB) (plumb-bench's cost of a thick ADD). Returns 1 when
/// the socket cannot be set up (another daemon answering on it, a directory others can write included), with the reason on
/// stderr.
int run(const Options& o, CniMain cni_main);

namespace detail {

/// What a worker tells the daemon on its control socket after each invocation, just before it
/// answers the invocation's shim itself (wire.hpp).
struct Done {
  int32_t exit_code;
  int32_t retiring;    ///< 1: the worker exits now (it served its share)
  int64_t cpu_us;      ///< user + system CPU the worker spent on the invocation
  int64_t minflt;      ///< page faults (without I/O) during the invocation
  int64_t maxrss_kib;  ///< the worker's peak RSS so far
  int64_t more;        ///< 1: the shim is answered, but the worker still works for the invocation
                       ///< (source/after_answer.hpp); a second Done with 0 follows
  char verb[12];       ///< CNI_COMMAND of the invocation, NUL-terminated ("" when it noted no outcome)
  int32_t cni_code;    ///< the CNI error code it ended with, 0 on success
  int64_t duration_us;  ///< how long the invocation ran, µs
};

/// User + system CPU time of `ru`, in µs.
inline int64_t cpu_us(const rusage& ru) {
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * int64_t{1'000'000} + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/// A worker's life (worker.cpp), in a freshly forked process whose descriptor `control` is its
/// socket to the daemon and `log` the daemon's stderr: receives a connection, serves it, sends
/// the daemon its Done and then the shim its Status, until the daemon closes `control` or
/// `max_requests` were served. Never returns.
/// `cached`: the daemon keeps watched caches, so the worker asks it for pods, NADs and
/// IPAMClaims before the API server (Lookup below).
/// `json_log`: the invocations' lines as JSON (Options::json_log).
[[noreturn]] void worker_main(int control, int log, int max_requests, CniMain cni_main, bool cached, bool json_log);

/// The line of one invocation that took `ms` milliseconds: text ("ADD default/web
/// container=... ifname=eth0 networks=a,b code=0 duration_ms=1.234[ error=...]") or a JSON
/// object with the same fields (time, level, msg "invocation", verb, pod, containerID, ifname,
/// networks, code, error, durationMs). Ends with a newline.
[[nodiscard]] std::string outcome_line(const Outcome& o, double ms, bool json);
/// Takes the outcome the invocation noted (note_outcome); nullopt when it noted none.
[[nodiscard]] std::optional<Outcome> take_outcome();

/// A worker's question to the daemon on its control socket, in an invocation: kLookupMagic,
/// the collection (source::Watched), the API server's URL, NUL, "ns/name". The daemon answers
/// at once with one message: '1' and the object's JSON, or '0' (not held).
inline constexpr char kLookupMagic[] = "plumb-lookup";
/// The largest answer a worker takes (a larger object is fetched by the worker instead).
inline constexpr size_t kMaxLookupAnswer = size_t{1} << 20;

}  // namespace detail

}  // namespace plumb::daemon
