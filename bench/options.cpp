// plumb-bench's command line (options.hpp).
#include "bench/options.hpp"

#include <algorithm>
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
               "                   [--tput-pods N] [--tput-rounds N]\n"
               "                   [--out DIR] [--plumb PATH] [--floor PATH] [--cni-path DIR] [--scratch DIR]\n"
               "                   [--thin | --thick [--shim PATH]]   (plumb exec'd per verb, or (default)\n"
               "                                                      `plumb daemon` + plumb-shim)\n"
               "                   [--conflist FILE]   (your CNI network against plumb and the floor; bench/README.md)\n"
               "Runs as root; creates its own private network and mount namespaces. See bench/README.md.\n");
  std::exit(code);
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  if (out.empty()) throw std::runtime_error("empty list \"" + s + "\"");
  return out;
}

}  // namespace

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
  }
  for (size_t i = 0; i < a.size(); ++i) {
    auto next = [&]() -> std::string {
      if (i + 1 >= a.size()) usage(2);
      return a[++i];
    };
    const std::string& k = a[i];
    if (k == "--quick") continue;
    if (k == "-h" || k == "--help") usage(0);
    if (k == "--samples") o.samples = std::stoi(next());
    else if (k == "--warmup") o.warmup = std::stoi(next());
    else if (k == "--scenarios") o.scenarios = next();
    else if (k == "--fill") o.fill_levels = int_list(next());
    else if (k == "--fill-samples") o.fill_samples = std::stoi(next());
    else if (k == "--fill-workers") o.fill_workers = std::stoi(next());
    else if (k == "--fill-reference-max") o.fill_reference_max = std::stoi(next());
    else if (k == "--workers") o.workers = int_list(next());
    else if (k == "--tput-pods") o.tput_pods = std::stoi(next());
    else if (k == "--tput-rounds") o.tput_rounds = std::stoi(next());
    else if (k == "--out") o.out_dir = next();
    else if (k == "--plumb") o.plumb = next();
    else if (k == "--floor") o.floor = next();
    else if (k == "--thick") o.thick = true;
    else if (k == "--thin") o.thick = false;
    else if (k == "--shim") o.shim = next();
    else if (k == "--cni-path") o.cni_path = next();
    else if (k == "--scratch") o.scratch_parent = next();
    else if (k == "--conflist") o.conflist = next();
    else usage(2);
  }
  if (!o.conflist.empty()) {
    // The user's network is scenario x; a/b/c are plumb's own and not run with it.
    if (o.conflist.front() != '/') o.conflist = std::filesystem::absolute(o.conflist).string();
    o.scenarios = "x";
  }
  for (char c : o.scenarios) {
    if (c != 'a' && c != 'b' && c != 'c' && c != 'x') throw std::runtime_error(std::string("unknown scenario '") + c + "' (a, b, c)");
    if (c == 'x' && o.conflist.empty()) throw std::runtime_error("scenario x is the network of --conflist FILE");
  }
  if (o.samples < 1 || o.warmup < 0 || o.fill_samples < 1 || o.fill_workers < 1 || o.tput_pods < 1 || o.tput_rounds < 1) {
    throw std::runtime_error("sample counts and worker counts must be positive");
  }
  std::sort(o.fill_levels.begin(), o.fill_levels.end());
  // The fill sweep and the throughput runs use the richest scenario asked for (c by default), so
  // --scenarios never runs a scenario that was not asked for (and passed the preflight).
  std::sort(o.scenarios.begin(), o.scenarios.end());
  o.scenarios.erase(std::unique(o.scenarios.begin(), o.scenarios.end()), o.scenarios.end());
  if (o.scenarios.empty()) throw std::runtime_error("--scenarios is empty");
  o.fill_scenario = o.tput_scenario = o.scenarios.back();
  return o;
}

}  // namespace bench
