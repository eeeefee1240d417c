// plumb-bench: what is measured (scenarios, the three ways, pods, samples) and the run that
// measures it (class Bench: set-up, preflight, the latency / throughput / fill phases).
//
// Everything happens inside a private network + mount namespace the harness creates at start
// (enter_private_root): two "node" namespaces (one for plumb and the floor, one for the reference
// chain, so each way fills its own node with its own pods) and one namespace per pod. Nothing is
// created in the machine's own network namespace.
//
// Three ways, interleaved sample by sample (the order rotates every iteration):
//   plumb      the real binary, run exactly as a runtime runs it (CNI_* environment, config on
//              stdin; secondary networks from NADs and pod annotations in plumb's local store).
//   reference  Debian's containernetworking-plugins driven the way Multus delegates: one
//              conflist per attachment, cniVersion/name injected, prevResult chained,
//              capabilities turned into runtimeConfig, each plugin executed with CNI_* env.
//   floor      plumb-floor (bench/floor.cpp), linked statically and exec'd per verb: only the kernel
//              operations the attachment needs, deleting the pod's devices with one RTM_DELLINK (as
//              plumb does); floor-naive (latency phase only) the same but one RTM_DELLINK per device
//              (as the reference plugins do).
//   floor-warm the same operations done by `plumb-floor serve`, already running in the node, that
//              plumb-shim exec'd per verb wakes and waits for (as thick plumb's daemon and shim):
//              the yardstick of plumb's default (thick) deployment.
// With --conflist, scenario x replaces a/b/c: the pod's default network is the user's conflist,
// run by "reference" (their plugins from --cni-path, as a runtime runs them) and by plumb (which
// implements or delegates each plugin); the floor there is scenario a's. A second --conflist is
// scenario y, measured the same way beside x (the report compares the two networks pair by pair).
// Every ADD is verified from the kernel (each interface present, up, with its addresses) before
// it is counted and every DEL verified (only lo left); any failure stops the run with the
// plugin's output. ways.cpp runs the ways, bench.cpp the phases, report.cpp the output.
#pragma once

#include <rapidjson/document.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "bench/options.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/netns.hpp"

namespace bench {

enum class Way {
  Plumb = 0,
  Reference = 1,
  Floor = 2,
  FloorNaive = 3,
  FloorWarm = 4,
  /// API phase (api.cpp): plumb exec'd per verb, its pod and NADs read from the API server.
  ApiThin = 5,
  /// API phase: `plumb daemon` watching the API server (pods, NADs cached) and the shim per verb.
  ApiThick = 6,
  /// ApiThick with the pod's namespace in systemNamespaces: the same ADD without its
  /// network-status write.
  ApiThickNoStatus = 7,
  /// ApiThick with statusAfterAnswer: the network-status write after the shim's answer.
  ApiThickStatusAfter = 8,
};
/// The ways of every phase.
inline constexpr Way kWays[] = {Way::Plumb, Way::Reference, Way::Floor, Way::FloorWarm};
/// The latency phase also measures the floor without DEL batching.
inline constexpr Way kLatencyWays[] = {Way::Plumb, Way::Reference, Way::Floor, Way::FloorWarm, Way::FloorNaive};
/// The ways of the API phase, the embedded store's plumb first (its first pod makes the node
/// objects the floors take as given).
inline constexpr Way kApiWays[] = {
    Way::Plumb,     Way::ApiThick, Way::ApiThickNoStatus, Way::ApiThickStatusAfter, Way::ApiThin,
    Way::FloorWarm, Way::Floor};
/// Whether `w` reads its pod and NADs from the API server.
inline bool is_api(Way w) {
  return w == Way::ApiThin || w == Way::ApiThick || w == Way::ApiThickNoStatus || w == Way::ApiThickStatusAfter;
}
/// Whether `w` is one of the floors (plumb-floor, per verb or warm).
inline bool is_floor(Way w) { return w == Way::Floor || w == Way::FloorNaive || w == Way::FloorWarm; }
/// "plumb", "reference", "floor", "floor-naive", "floor-warm", "api-thin", "api-thick",
/// "api-thick-no-status", "api-thick-status-after".
const char* way_name(Way w);

/// Scenarios b and c give the pod two secondary networks (net1, net2).
inline bool has_secondaries(char scenario) { return scenario == 'b' || scenario == 'c'; }
/// Scenarios c and x get the runtime's runtimeConfig (a host port, a bandwidth limit).
inline bool has_runtime_config(char scenario) { return scenario == 'c' || is_user_scenario(scenario); }
/// The scenario whose kernel operations the floor does for `scenario` (x, y: a's).
inline char floor_scenario(char scenario) { return is_user_scenario(scenario) ? 'a' : scenario; }

/// One invocation's cost: for the reference chain, the sum of wall time of its plugin
/// executions, the largest peak RSS among them and the sum of their CPU time.
struct Cost {
  int64_t ns = 0;
  long rss_kib = 0;
  int64_t cpu_us = 0;
  int procs = 0;
  void add(const Proc& p);
};

/// What the API server saw of one ADD (API phase): its requests, counted from its log.
struct ApiCounts {
  int gets = 0;         ///< GETs of the pod and its NADs (a cache miss, or thin plumb's reads)
  int status = 0;       ///< PATCHes of the pod's status (network-status)
  int events = 0;       ///< Events POSTed (one per attachment)
  int connections = 0;  ///< TLS connections the server accepted (each a handshake)
  /// Thick: from the shim's exit until the server logged the ADD's last Event (the worker's time
  /// after the runtime has its answer; api-thick-status-after: its network-status write, then
  /// the Events); thin: 0 (its Events are inside its ADD).
  int64_t events_ns = 0;
};

/// One measured ADD+DEL pair.
struct Sample {
  std::string phase;  ///< "latency", "fill", "throughput", "preflight"
  char scenario = 'a';
  Way way = Way::Plumb;
  int fill = 0;       ///< pods already on the node
  int iter = 0;       ///< iteration (pairs of the same iteration ran back to back)
  bool warmup = false;
  Cost add, del;
  int api_latency_ms = 0;  ///< API phase: the API server's per-request latency
  ApiCounts api;           ///< API phase, ways reading the API server
};

/// One throughput run: `pods` ADDs of one way on `workers` threads.
/// The throughput runs of one way at one worker count, summed: pods ADDed, their wall time, and
/// each ADD's latency.
struct Tput {
  Way way;
  int workers;
  int pods;
  int64_t wall_ns;
  std::vector<int64_t> add_ns;
};

/// One process start: a plugin answering CNI VERSION (process start-up, library loading, exit).
struct Startup {
  std::string binary;  ///< "plumb", or the reference plugin's type
  Cost cost;
};

/// One pod being attached.
struct Pod {
  std::string netns;  ///< name under /run/netns
  std::string cid;
  std::string name;
  char scenario = 'a';
  Way way = Way::Plumb;
  int host_port = 0;
  unsigned slot = 0;                     ///< floor addressing
  std::string plumb_result;              ///< plumb's ADD stdout (prevResult of its DEL)
  std::vector<std::string> ref_results;  ///< reference: the final result of each attachment
  std::map<std::string, std::vector<plumb::IpAddr>> expect;  ///< pod interface -> its addresses
};

// The networks (scenarios.cpp). Addresses are IPv6 documentation addresses only: the IPv4
// documentation /24s cannot hold 1000 pods per network. The floor uses ::1:0 + slot, outside
// host-local's range.
inline constexpr const char* kSubnet[4] = {"", "2001:db8:0:1::/64", "2001:db8:0:2::/64", "2001:db8:0:3::/64"};
/// host-local IPAM of network `net` (1..3) with its files in `data_dir`.
std::string ipam_json(const std::string& data_dir, int net);
/// The default network's conflist for a scenario: bridge + host-local; in c also portmap and
/// bandwidth (capabilities portMappings and bandwidth).
std::string default_conflist(const std::string& data_dir, char scenario);
/// net1: a second bridge (br1) with host-local.
std::string sec_bridge_json(const std::string& data_dir);
/// net2: a bridge-mode macvlan on mst0 with host-local.
std::string sec_macvlan_json(const std::string& data_dir);
/// `network` (a conflist or a single plugin config, JSON) with the "dataDir" of every host-local
/// "ipam" set to `data_dir`: plumb's copy of a user's conflist allocates in its own node's
/// directory. Throws when `network` is not a JSON object.
std::string with_data_dir(const std::string& network, const std::string& data_dir);
/// The runtime's runtimeConfig for a pod of scenario c (what containerd derives from the pod
/// spec): one host port and a bandwidth limit of 100 Mbit/s each way.
std::string runtime_config(const Pod& p);

/// Reads "ips" of a CNI 1.0.0 result into expect: each address on its sandbox interface. Without
/// `ips_required` (a user's conflist, scenario x) a result without "ips" expects no address.
/// Throws naming `what` when the result is not one.
void expect_from_result(const rapidjson::Value& r, std::map<std::string, std::vector<plumb::IpAddr>>& expect,
                        const std::string& what, bool ips_required = true);
/// Adds each interface's addresses of a network-status annotation value (JSON text) to p.expect.
/// Throws naming `pod` when it is not a JSON list.
void expect_from_network_status(const std::string& status, const std::string& pod, Pod& p);

/// A node namespace and its scratch directory (store, state, IPAM data of this node).
struct NodeNs {
  std::string name;
  std::string dir;
  std::optional<plumb::netns::Netns> ns;
};

/// A `plumb daemon` the bench runs in plumb's node namespace (ways.cpp): the embedded store's
/// (--thick), or the API phase's, watching the API test server.
struct PlumbDaemon {
  Background proc;
  std::string dir;  ///< its socket, --usage-log file and log are here
  std::string socket, usage, log;
  size_t usage_read = 0;          ///< bytes of `usage` already counted
  std::atomic<int> in_flight{0};  ///< invocations of the bench's threads running through it
};

/// The API phase's Kubernetes API test server (tests/support/kube_api_test_server.py, api.cpp).
struct ApiServer {
  Background proc;
  std::string dir;         ///< its objects, tokens, requests.log, watch-events.log
  std::string kubeconfig;  ///< a kubeconfig for it (bearer token file)
  size_t log_read = 0;     ///< bytes of requests.log already counted
  size_t conn_read = 0;    ///< bytes of connections.log already counted
  size_t events_read = 0;  ///< bytes of watch-events.log already searched
};

/// Everything a run measured, for report().
struct Results {
  const Options* options = nullptr;
  std::vector<Sample> samples;
  std::vector<Tput> tput;
  std::vector<Startup> startup;
  std::string started_utc, load_start;
  std::map<std::string, double> phase_secs;
  int64_t elapsed_ns = 0;
  /// What was measured: "plumb" (its --version: version and git commit), "reference" (the
  /// package and version of the plugins in --cni-path, or their own about text).
  std::map<std::string, std::string> versions;
};

class Bench {
 public:
  Bench(Options o, std::string scratch) : o_(std::move(o)), scratch_(std::move(scratch)) {}

  /// Node namespaces, their macvlan master, plumb's store and default network configs.
  void setup();
  /// One pod per scenario and way; throws naming every scenario that cannot run.
  void preflight();
  void phase_latency();
  void phase_throughput();
  Tput throughput_run(int run, Way w, int workers);
  void add_tput_run(Tput run);
  void phase_fill();
  /// Process start-up: plumb and the reference plugins answering VERSION, interleaved.
  void phase_startup();
  /// Pods and NADs from a Kubernetes API server (api.cpp): for each --api-latency, the ways of
  /// kApiWays interleaved on scenario b's pod.
  void phase_api();
  /// What was measured (the report's input).
  [[nodiscard]] Results results() const;
  Progress& progress() { return progress_; }

 private:
  // One pod: make its sandbox, ADD (timed), verify, DEL (timed), verify, remove the sandbox.
  Sample one_sample(const std::string& phase, char scenario, Way w, int fill, int iter, bool warmup);
  Pod new_pod(char scenario, Way w, const std::string& tag);
  void make_sandbox(Pod& p);
  void drop_sandbox(Pod& p);
  void fill_nodes(std::map<Way, std::vector<Pod>>& fill, int current, int level);
  // ways.cpp
  Cost add(Pod& p);
  Cost del(Pod& p);
  Cost add_plumb(Pod& p);
  Cost del_plumb(Pod& p);
  Cost add_reference(Pod& p);
  Cost del_reference(Pod& p);
  Cost add_floor(Pod& p);
  Cost del_floor(Pod& p);
  /// Runs the floor of `p.way` for `verb` (plumb-floor, or plumb-shim to the warm floor); adds its
  /// cost to `c`. Throws naming the command and its output when it fails.
  Proc run_floor(const std::string& verb, const Pod& p, Cost& c);
  void verify_added(const Pod& p);
  /// plumb's ADD result (JSON text) gives eth0 the addresses p.expect has for it; throws if not.
  static void check_result_eth0(const Pod& p, const std::string& result);
  void verify_deleted(const Pod& p);
  NodeNs& node_of(Way w) { return w == Way::Reference ? ref_ : plumb_; }
  /// The conflist of the pod's default network for the reference way (scenario x: the user's).
  std::string reference_default_conflist(char scenario) const;
  std::vector<std::string> cni_env(const std::string& verb, const Pod& p, const std::string& ifname) const;
  std::string plumb_config(const Pod& p, const std::string& prev_result) const;
  // --thick (ways.cpp): `plumb daemon` in plumb's node namespace, the shim per verb.
  /// Starts `d` (its files under `dir`) with `extra` arguments; waits for its socket.
  void start_daemon(PlumbDaemon& d, const std::string& dir, const std::vector<std::string>& extra);
  /// Runs plumb-shim to daemon `d`; adds its cost to `c` with the worker's CPU and peak RSS the
  /// daemon logged for the invocation and the daemon's own CPU meanwhile.
  Proc run_shim(PlumbDaemon& d, const std::vector<std::string>& env, const std::string& config, Cost& c);
  // api.cpp: the API phase's server, daemon and ways.
  void start_api(int latency_ms);
  void stop_api();
  void api_iteration(int latency_ms, int iter, bool warmup);
  /// Writes the pod's object to the API server (after a rename, whole) and waits until its watch
  /// sent it (the daemon's cache then holds it a moment later).
  void api_put_pod(const Pod& p);
  void api_wait_watched(const std::vector<Pod>& pods);
  Cost add_api(Pod& p, ApiCounts& counts);
  Cost del_api(Pod& p);
  /// The requests the API server logged since the last call.
  std::vector<std::string> api_new_requests();
  /// The TLS connections the API server accepted since the last call.
  int api_new_connections();
  std::vector<std::string> api_env(const std::string& verb, const Pod& p) const;
  std::string api_config(const Pod& p, const std::string& prev_result) const;
  /// `plumb-floor serve` in plumb's node namespace: the warm floor.
  void start_floor_server();
  /// Runs plumb (or the shim) with `env` and `config`; adds its cost to `c`, in --thick runs with
  /// the worker's CPU and peak RSS the daemon logged for the invocation and the daemon's own CPU
  /// meanwhile.
  Proc run_plumb(const std::vector<std::string>& env, const std::string& config, Cost& c);
  /// The CPU (µs, summed) and peak RSS (KiB, largest) of the invocations daemon `d` logged since
  /// the last call (one in the sequential phases).
  std::pair<int64_t, long> take_invocation_usage(PlumbDaemon& d);
  /// Runs fn(i) for i in [0, n) on `workers` threads, each inside `node`; returns wall time.
  int64_t parallel(int n, int workers, NodeNs& node, const std::function<void(int)>& fn);
  /// `ways` rotated by `iter` (the order changes every iteration).
  static std::vector<Way> order(int iter, const std::vector<Way>& ways);
  void record(const Sample& s);
  /// Fills versions_ (Results::versions).
  void find_versions();

  Options o_;
  std::string scratch_;
  NodeNs plumb_{"node-plumb", {}, {}}, ref_{"node-ref", {}, {}};
  std::string bpffs_;
  std::atomic<int> seq_{0};
  std::atomic<unsigned> slot_{0};
  std::atomic<int> port_{40000};
  Progress progress_;
  std::mutex mu_;
  std::vector<Sample> samples_;
  std::vector<Tput> tput_;
  std::vector<Startup> startup_;
  std::map<Way, int> filled_;
  std::string started_utc_, load_start_;
  std::map<char, std::string> user_conflist_;  ///< --conflist: scenario x's (and y's) file text
  std::map<std::string, double> phase_secs_;
  std::map<std::string, std::string> versions_;
  PlumbDaemon daemon_;                         ///< --thick: plumb's daemon on the embedded store
  PlumbDaemon api_daemon_;                     ///< API phase: the daemon watching api_
  ApiServer api_;                              ///< API phase: the API test server
  Background floor_server_;                    ///< the warm floor
  std::string floor_socket_;                   ///< its socket
};

/// Writes results.json, results.md and the latency-vs-pods plot to options->out_dir and prints
/// results.md on stdout (bench/README.md describes them). Throws if a file or gnuplot fails.
void report(const Results& r);
/// The API phase's section (api_report.cpp): its Markdown tables to `md`, its summary as the
/// returned JSON list (one object per latency); `goal` gets, per latency (ms), the median pair
/// ratio of api-thick's ADD over the embedded store's.
rapidjson::Value api_report(const Results& r, std::ostream& md, rapidjson::Document::AllocatorType& al,
                            std::map<int, double>& goal);

}  // namespace bench
