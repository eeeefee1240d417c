// plumb-bench's settings and their command line (bench/README.md lists them).
#pragma once

#include <string>
#include <vector>

#ifndef PLUMB_BENCH_PLUMB
#define PLUMB_BENCH_PLUMB "plumb"
#endif
#ifndef PLUMB_BENCH_SHIM
#define PLUMB_BENCH_SHIM "plumb-shim"
#endif
#ifndef PLUMB_BENCH_KUBE_API_SERVER
#define PLUMB_BENCH_KUBE_API_SERVER "tests/support/kube_api_test_server.py"
#endif
#ifndef PLUMB_BENCH_FLOOR
#define PLUMB_BENCH_FLOOR "plumb-floor"
#endif

namespace bench {

/// The phases a run can be asked for (--phases), in the order they run.
inline constexpr const char* kPhases[] = {"startup", "latency", "throughput", "fill", "api"};

/// Every setting of one run.
struct Options {
  bool quick = false;
  int samples = 40;                    // measured ADD+DEL pairs per scenario and way
  int warmup = 3;                      // discarded iterations before them
  std::string scenarios = "abc";
  std::vector<int> fill_levels = {0, 100, 500, 1000};
  /// ADD+DEL pairs per fill level and way: at 1,000 pods one pair's ratio varies as much as the
  /// kernel's own work does, and fewer samples left the median unstable for the same code
  /// (bench/RESULTS.md).
  int fill_samples = 20;
  char fill_scenario = 'c';            // shape of the measured and resident pods (richest of --scenarios)
  int fill_workers = 4;                // concurrent ADDs while filling (untimed)
  /// The reference node is filled to at most this many pods: its iptables rules make each ADD
  /// slower as it fills (filling it to 1000 took 17 of a default run's minutes), and its growth
  /// is told by the levels up to here. The floor and plumb go to every level.
  int fill_reference_max = 500;
  std::vector<int> workers = {1, 2, 4};
  int tput_pods = 16;                  // pods ADDed per run of a (way, worker count)
  /// Runs of each (way, worker count), interleaved (the ways' order rotates every run): a run of
  /// 16 pods lasts some 50 ms, and one alone swung plumb/floor from 0.6 to 0.9.
  int tput_rounds = 3;
  char tput_scenario = 'c';            // richest of --scenarios
  std::string out_dir = "bench/out";
  std::string plumb = PLUMB_BENCH_PLUMB;
  std::string floor = PLUMB_BENCH_FLOOR;
  /// plumb runs as `<plumb> daemon` in its node namespace and each verb executes the shim
  /// (cni-entry/daemon/), as on a node deployed with deploy/thick/daemonset.yaml (Multus's "thick"
  /// plugin, its quickstart's deployment): the default. --thin: the plumb binary exec'd per verb.
  bool thick = true;
  std::string shim = PLUMB_BENCH_SHIM;
  std::string cni_path = "/usr/lib/cni";   // the reference plugins, or those of --conflist
  /// --conflist (absolute paths): the user's networks, scenario x (the first) and y (a second
  /// --conflist, compared side by side with the first).
  std::vector<std::string> conflists;
  std::string scratch_parent = "/var/tmp";
  /// The phases to run (--phases; every one of kPhases by default).
  std::vector<std::string> phases = {"startup", "latency", "throughput", "fill", "api"};
  /// API phase: the API test server's per-request latencies, ms, one block of samples each.
  std::vector<int> api_latencies = {1, 10};
  /// API phase: measured ADD+DEL pairs per latency and way (after --warmup discarded ones).
  int api_samples = 20;
  /// The Kubernetes API test server the API phase runs (python3; the source tree's by default).
  std::string kube_api_server = PLUMB_BENCH_KUBE_API_SERVER;
  [[nodiscard]] bool runs(const std::string& phase) const;
};

/// Scenarios x and y are the networks of --conflist (the first and the second).
inline bool is_user_scenario(char scenario) { return scenario == 'x' || scenario == 'y'; }

/// Parses the command line (--quick first, so explicit settings given with it win). Prints usage
/// and exits on -h/--help or an unknown flag; throws on invalid values.
Options parse_options(int argc, char** argv);

}  // namespace bench
