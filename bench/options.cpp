// plumb-bench's command line (options.hpp).
#include "bench/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace bench {
namespace {

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: plumb-bench [--quick] [--samples N] [--warmup N] [--scenarios abc] [--fill 0,100,500,1000]\n"
               "                   [--fill-samples N] [--fill-workers N] [--fill-reference-max N] [--workers 1,2,4]\n"
               "                   [--tput-pods N] [--tput-rounds N] [--api-latency 1,10] [--api-samples N]\n"
               "                   [--phases startup,latency,throughput,fill,api] [--kube-api-server PATH]\n"
               "                   [--out DIR] [--plumb PATH] [--floor PATH] [--cni-path DIR] [--scratch DIR]\n"
               "                   [--thin | --thick [--shim PATH]]   (plumb exec'd per verb, or (default)\n"
               "                                                      `plumb daemon` + plumb-shim)\n"
               "                   [--conflist FILE [--conflist FILE2]]   (your CNI network against plumb and the "
               "floor, or two\n"
               "                                                       networks side by side; bench/README.md)\n"
               "Runs as root; creates its own private network and mount namespaces. See bench/README.md.\n");
  std::exit(code);
}

/// `s` as a whole non-negative decimal number. Throws naming `flag` and the value.
int number(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < 0 || v > 1'000'000) {
    throw std::runtime_error(flag + " wants a number from 0 to 1000000, not \"" + s + "\"");
  }
  return static_cast<int>(v);
}

std::vector<int> int_list(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(number(flag + " (a comma-separated list)", item));
  if (out.empty()) throw std::runtime_error(flag + " wants a comma-separated list of numbers, not \"" + s + "\"");
  return out;
}

/// The comma-separated phases of --phases, each one of kPhases. Throws naming an unknown one.
std::vector<std::string> phase_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (std::find(std::begin(kPhases), std::end(kPhases), item) == std::end(kPhases))
      throw std::runtime_error("--phases: unknown phase \"" + item + "\" (startup, latency, throughput, fill, api)");
    out.push_back(item);
  }
  if (out.empty()) throw std::runtime_error("--phases wants a comma-separated list of phases");
  return out;
}

}  // namespace

bool Options::runs(const std::string& phase) const {
  return std::find(phases.begin(), phases.end(), phase) != phases.end();
}

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<std::string> a(argv + 1, argv + argc);
  // --quick first, so explicit settings given with it still win.
  if (std::find(a.begin(), a.end(), "--quick") != a.end()) {
    o.quick = true;
    o.samples = 10;
    o.warmup = 2;
    o.fill_levels = {0, 50};
    o.fill_samples = 4;
    o.workers = {1, 2, 4};
    o.tput_pods = 8;
    o.tput_rounds = 1;
    o.fill_reference_max = 50;
    o.api_samples = 6;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    auto next = [&]() -> std::string {
      if (i + 1 >= a.size()) usage(2);
      return a[++i];
    };
    const std::string& k = a[i];
    if (k == "--quick") continue;
    if (k == "-h" || k == "--help") usage(0);
    if (k == "--samples")
      o.samples = number(k, next());
    else if (k == "--warmup")
      o.warmup = number(k, next());
    else if (k == "--scenarios") o.scenarios = next();
    else if (k == "--fill")
      o.fill_levels = int_list(k, next());
    else if (k == "--fill-samples")
      o.fill_samples = number(k, next());
    else if (k == "--fill-workers")
      o.fill_workers = number(k, next());
    else if (k == "--fill-reference-max")
      o.fill_reference_max = number(k, next());
    else if (k == "--workers")
      o.workers = int_list(k, next());
    else if (k == "--tput-pods")
      o.tput_pods = number(k, next());
    else if (k == "--tput-rounds")
      o.tput_rounds = number(k, next());
    else if (k == "--api-latency")
      o.api_latencies = int_list(k, next());
    else if (k == "--api-samples")
      o.api_samples = number(k, next());
    else if (k == "--phases")
      o.phases = phase_list(next());
    else if (k == "--kube-api-server")
      o.kube_api_server = next();
    else if (k == "--out") o.out_dir = next();
    else if (k == "--plumb") o.plumb = next();
    else if (k == "--floor") o.floor = next();
    else if (k == "--thick") o.thick = true;
    else if (k == "--thin") o.thick = false;
    else if (k == "--shim") o.shim = next();
    else if (k == "--cni-path") o.cni_path = next();
    else if (k == "--scratch") o.scratch_parent = next();
    else if (k == "--conflist")
      o.conflists.push_back(next());
    else usage(2);
  }
  if (o.conflists.size() > 2)
    throw std::runtime_error("--conflist is given once (your network) or twice (two networks side by side)");
  if (!o.conflists.empty()) {
    // The user's networks are scenarios x and y; a/b/c are plumb's own and not run with them.
    for (auto& c : o.conflists) {
      if (c.empty() || c.front() != '/') c = std::filesystem::absolute(c).string();
    }
    o.scenarios = o.conflists.size() == 2 ? "xy" : "x";
  }
  for (char c : o.scenarios) {
    if (c != 'a' && c != 'b' && c != 'c' && !is_user_scenario(c))
      throw std::runtime_error(std::string("unknown scenario '") + c + "' (a, b, c)");
    if (is_user_scenario(c) && o.conflists.empty())
      throw std::runtime_error("scenarios x and y are the networks of --conflist FILE");
  }
  if (o.samples < 1 || o.api_samples < 1 || o.warmup < 0 || o.fill_samples < 1 || o.fill_workers < 1 ||
      o.tput_pods < 1 || o.tput_rounds < 1) {
    throw std::runtime_error("sample counts and worker counts must be positive");
  }
  std::sort(o.fill_levels.begin(), o.fill_levels.end());
  // The fill sweep and the throughput runs use the richest scenario asked for (c by default), so
  // --scenarios never runs a scenario that was not asked for (and passed the preflight).
  std::sort(o.scenarios.begin(), o.scenarios.end());
  o.scenarios.erase(std::unique(o.scenarios.begin(), o.scenarios.end()), o.scenarios.end());
  if (o.scenarios.empty()) throw std::runtime_error("--scenarios is empty");
  o.fill_scenario = o.tput_scenario = o.scenarios.back();
  // The API phase measures plumb's own scenario b (its NADs are what the API server serves).
  if (!o.conflists.empty()) std::erase(o.phases, std::string("api"));
  return o;
}

}  // namespace bench
