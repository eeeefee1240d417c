// The bench's output (bench.hpp report()): results.json (settings, summaries, every sample),
// results.md (the tables of bench/README.md) and the latency-vs-pods plot through gnuplot.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench/bench.hpp"
#include "bench/stats.hpp"
#include "engine/base/text.hpp"

namespace bench {
namespace {

namespace rj = rapidjson;

/// "<cpu model>, N CPUs, M GiB, Linux <release>".
std::string machine_text() {
  std::string model;
  std::istringstream cpu(read_text("/proc/cpuinfo"));
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  long mem_kib = 0;
  std::istringstream mem(read_text("/proc/meminfo"));
  for (std::string line; std::getline(mem, line);) {
    if (line.rfind("MemTotal:", 0) == 0) mem_kib = std::stol(line.substr(9));
  }
  utsname u{};
  uname(&u);
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, " +
         std::to_string(mem_kib / 1024 / 1024) + " GiB, Linux " + u.release;
}

/// "<fstype> (<mount options>) at <mount point>": the filesystem holding `dir` (the scratch
/// directory: the nodes' state, store and IPAM files), from /proc/self/mountinfo. plumb's cost
/// depends on it (bench/README.md: a new inode on ext4 without a journal scans recently deleted
/// ones); the floor writes no file.
std::string filesystem_text(const std::string& dir) {
  std::error_code ec;
  const std::string path = std::filesystem::canonical(dir, ec).string();
  std::string best_point, best;
  std::istringstream in(read_text("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const auto f = plumb::text::split(line, ' ');
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 6 || dash == f.end() || f.end() - dash < 3) continue;
    const std::string point(f[4]);
    const bool covers = path == point || point == "/" || path.starts_with(point + "/");
    if (!covers || point.size() < best_point.size()) continue;
    best_point = point;
    best = std::string(dash[1]) + " (" + std::string(f[5]) + "," + std::string(dash[3]) + ") at " + point;
  }
  return best.empty() ? "an unknown filesystem" : best;
}

/// Which figure of a Cost: wall milliseconds, peak RSS MiB or CPU milliseconds.
enum class Figure { Ms, RssMib, CpuMs };

/// One report: the JSON document and the Markdown text built side by side, table by table.
class Report {
 public:
  explicit Report(const Results& r) : r_(r), o_(*r.options), doc_(rj::kObjectType), al_(doc_.GetAllocator()) {}
  void run();

 private:
  std::vector<const Sample*> sel(const std::string& phase, char s, Way w, int fill) const;
  static std::vector<double> vals(const std::vector<const Sample*>& v, bool add, Figure what);
  std::vector<double> pair_ratios(const std::string& phase, char s, int fill, Way num, Way den, bool add) const;
  rj::Value str(const std::string& s) { return rj::Value(s.c_str(), al_); }
  rj::Value dist_json(const Dist& d);
  void header(const std::string& load_end);
  rj::Value samples();
  rj::Value latency();
  rj::Value ratios();
  void compare_networks();
  rj::Value fill();
  rj::Value throughput();
  rj::Value startup();
  void goals();
  void phases();
  void write_files();
  void plot();

  const Results& r_;
  const Options& o_;
  rj::Document doc_;
  rj::Document::AllocatorType& al_;
  std::ostringstream md_;
  std::map<char, std::map<std::string, double>> med_;      // per scenario: ratio medians by their JSON key
  std::map<int, std::map<std::string, double>> fill_med_;  // per fill level: the same
  std::map<Way, std::map<int, double>> tput_pps_;      // per way and worker count: pods/s
  std::map<Way, std::map<int, double>> fill_p50_;      // per way and fill level: p50 ADD ms
  std::map<int, double> api_goal_;                     // per API latency: ADD api-thick/plumb (embedded)
};

std::vector<const Sample*> Report::sel(const std::string& phase, char s, Way w, int fill) const {
  std::vector<const Sample*> v;
  for (auto& x : r_.samples) {
    if (x.phase == phase && x.scenario == s && x.way == w && x.fill == fill && !x.warmup) v.push_back(&x);
  }
  return v;
}

std::vector<double> Report::vals(const std::vector<const Sample*>& v, bool add, Figure what) {
  std::vector<double> out;
  for (auto* s : v) {
    const Cost& c = add ? s->add : s->del;
    out.push_back(what == Figure::Ms       ? static_cast<double>(c.ns) / 1e6
                  : what == Figure::RssMib ? static_cast<double>(c.rss_kib) / 1024.0
                                           : static_cast<double>(c.cpu_us) / 1e3);
  }
  return out;
}

/// Ratios pair by pair: samples of the same iteration (and scenario, fill level).
std::vector<double> Report::pair_ratios(const std::string& phase, char s, int fill, Way num, Way den, bool add) const {
  std::map<int, double> a, b;
  for (auto* x : sel(phase, s, num, fill)) a[x->iter] = static_cast<double>((add ? x->add : x->del).ns);
  for (auto* x : sel(phase, s, den, fill)) b[x->iter] = static_cast<double>((add ? x->add : x->del).ns);
  std::vector<double> r;
  for (auto& [it, v] : a) {
    if (b.count(it) && b[it] > 0) r.push_back(v / b[it]);
  }
  return r;
}

rj::Value Report::dist_json(const Dist& d) { return bench::dist_json(d, al_); }

/// The run's date, machine and settings (JSON) and the Markdown preamble.
void Report::header(const std::string& load_end) {
  const std::string load_start = std::string(plumb::text::trim(r_.load_start));
  rj::Value machine(rj::kObjectType);
  machine.AddMember("description", str(machine_text()), al_);
  machine.AddMember("loadavg_start", str(load_start), al_);
  machine.AddMember("loadavg_end", str(load_end), al_);
  doc_.AddMember("date", str(r_.started_utc), al_);
  doc_.AddMember("machine", machine, al_);
  rj::Value versions(rj::kObjectType);
  for (const auto& [k, v] : r_.versions) versions.AddMember(str(k), str(v), al_);
  doc_.AddMember("versions", versions, al_);
  rj::Value settings(rj::kObjectType);
  settings.AddMember("quick", o_.quick, al_);
  settings.AddMember("samples", o_.samples, al_);
  settings.AddMember("warmup", o_.warmup, al_);
  settings.AddMember("scenarios", str(o_.scenarios), al_);
  rj::Value levels(rj::kArrayType);
  for (int l : o_.fill_levels) levels.PushBack(l, al_);
  settings.AddMember("fill_levels", levels, al_);
  settings.AddMember("fill_samples", o_.fill_samples, al_);
  settings.AddMember("fill_scenario", str(std::string(1, o_.fill_scenario)), al_);
  settings.AddMember("fill_reference_max", o_.fill_reference_max, al_);
  settings.AddMember("throughput_pods", o_.tput_pods, al_);
  settings.AddMember("throughput_rounds", o_.tput_rounds, al_);
  settings.AddMember("plumb", str(o_.plumb), al_);
  settings.AddMember("thick", o_.thick, al_);
  settings.AddMember("cni_path", str(o_.cni_path), al_);
  rj::Value conflists(rj::kArrayType);
  for (const auto& c : o_.conflists) conflists.PushBack(str(c), al_);
  settings.AddMember("conflists", conflists, al_);
  settings.AddMember("scratch_filesystem", str(filesystem_text(o_.scratch_parent)), al_);
  rj::Value phases_run(rj::kArrayType);
  for (const auto& p : o_.phases) phases_run.PushBack(str(p), al_);
  settings.AddMember("phases", phases_run, al_);
  rj::Value api_latencies(rj::kArrayType);
  for (int l : o_.api_latencies) api_latencies.PushBack(l, al_);
  settings.AddMember("api_latencies_ms", api_latencies, al_);
  settings.AddMember("api_samples", o_.api_samples, al_);
  doc_.AddMember("settings", settings, al_);
  rj::Value phases(rj::kObjectType);
  for (auto& [k, v] : r_.phase_secs) phases.AddMember(str(k), rj::Value(v), al_);
  doc_.AddMember("phase_seconds", phases, al_);
  md_ << "# plumb pod set-up latency bench\n\n"
      << "Run " << r_.started_utc << " on " << machine_text() << ". Load average at start " << load_start << ", at end "
      << load_end << (o_.quick ? ". **--quick run: few samples.**" : ".") << " Node files (state, store, IPAM) on "
      << filesystem_text(o_.scratch_parent) << ".\n"
      << "plumb " << (r_.versions.count("plumb") ? r_.versions.at("plumb") : "?") << "; reference plugins ("
      << o_.cni_path << "): " << (r_.versions.count("reference") ? r_.versions.at("reference") : "?") << ".\n"
      << "Milliseconds of wall time per CNI invocation (posix_spawn to wait4), warm-up discarded; ratios are medians "
         "of "
         "per-pair ratios (the samples of one iteration). IPv6 pods, DAD off in pod namespaces.\n\n";
  if (o_.thick) {
    md_ << "**plumb runs thick** (the default; `--thin` for the plumb binary exec'd per verb): `plumb daemon` in its "
           "node namespace, `" << o_.shim
        << "` executed per verb; a plumb invocation's time is the shim's (it ends when the worker has answered it), "
           "its CPU the shim's, the worker's and the daemon's own meanwhile, its peak RSS the larger of shim and worker.\n\n";
  } else {
    md_ << "**plumb runs thin** (`--thin`): `" << o_.plumb << "` executed per verb, its process start-up included.\n\n";
  }
  for (size_t i = 0; i < o_.conflists.size(); ++i) {
    md_ << "**Scenario "
        << "xy"[i] << ": the pod's default network is `" << o_.conflists[i] << "`** (plugins from `" << o_.cni_path
        << "`). \"reference\" is that network run as a runtime runs it (each plugin executed, prevResult chained, "
           "capabilities as runtimeConfig); plumb runs the same network (its own drivers where it has them, the plugin "
           "executed otherwise; host-local's dataDir moved to its node's directory); the floor is scenario a's "
           "(one veth on a bridge, one address, the default route, one nftables element).\n\n";
  }
}

/// Every sample, as measured.
rj::Value Report::samples() {
  rj::Value all(rj::kArrayType);
  for (auto& s : r_.samples) {
    rj::Value o(rj::kObjectType);
    o.AddMember("phase", str(s.phase), al_);
    o.AddMember("scenario", str(std::string(1, s.scenario)), al_);
    o.AddMember("way", str(way_name(s.way)), al_);
    o.AddMember("pods_on_node", s.fill, al_);
    o.AddMember("iteration", s.iter, al_);
    o.AddMember("warmup", s.warmup, al_);
    for (auto [key, c] : {std::pair<const char*, const Cost*>{"add", &s.add}, {"del", &s.del}}) {
      rj::Value co(rj::kObjectType);
      co.AddMember("ms", static_cast<double>(c->ns) / 1e6, al_);
      co.AddMember("peak_rss_kib", static_cast<int64_t>(c->rss_kib), al_);
      co.AddMember("cpu_ms", static_cast<double>(c->cpu_us) / 1e3, al_);
      co.AddMember("processes", c->procs, al_);
      o.AddMember(rj::StringRef(key), co, al_);
    }
    if (s.phase == "api") {
      o.AddMember("api_latency_ms", s.api_latency_ms, al_);
      if (is_api(s.way)) {
        rj::Value api(rj::kObjectType);
        api.AddMember("gets", s.api.gets, al_);
        api.AddMember("status_writes", s.api.status, al_);
        api.AddMember("events", s.api.events, al_);
        api.AddMember("tls_connections", s.api.connections, al_);
        api.AddMember("events_after_answer_ms", static_cast<double>(s.api.events_ns) / 1e6, al_);
        o.AddMember("api_requests", api, al_);
      }
    }
    all.PushBack(o, al_);
  }
  return all;
}

/// The latency table: p50/p90/p99 of ADD and DEL per scenario and way, empty node.
rj::Value Report::latency() {
  rj::Value lat(rj::kArrayType);
  md_ << "## Latency (pods on the node: 0)\n\n"
      << "| scenario | way | ADD p50 | ADD p90 | ADD p99 | DEL p50 | DEL p90 | DEL p99 | peak RSS MiB (ADD, max) | CPU ms (ADD p50) | plugin execs per ADD |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (char s : o_.scenarios) {
    for (Way w : kLatencyWays) {
      auto v = sel("latency", s, w, 0);
      Dist a = dist(vals(v, true, Figure::Ms)), d = dist(vals(v, false, Figure::Ms));
      Dist rss = dist(vals(v, true, Figure::RssMib)), cpu = dist(vals(v, true, Figure::CpuMs));
      md_ << "| " << s << " | " << way_name(w) << " | " << ms(a.p50) << " | " << ms(a.p90) << " | " << ms(a.p99) << " | "
          << ms(d.p50) << " | " << ms(d.p90) << " | " << ms(d.p99) << " | " << fmt(1, rss.max) << " | " << ms(cpu.p50)
          << " | " << (v.empty() ? 0 : v.front()->add.procs) << " |\n";
      rj::Value o(rj::kObjectType);
      o.AddMember("scenario", str(std::string(1, s)), al_);
      o.AddMember("way", str(way_name(w)), al_);
      o.AddMember("add_ms", dist_json(a), al_);
      o.AddMember("del_ms", dist_json(d), al_);
      o.AddMember("add_peak_rss_mib", dist_json(rss), al_);
      o.AddMember("del_peak_rss_mib", dist_json(dist(vals(v, false, Figure::RssMib))), al_);
      o.AddMember("add_cpu_ms", dist_json(cpu), al_);
      lat.PushBack(o, al_);
    }
  }
  return lat;
}

/// reference/plumb and plumb/floor, ADD and DEL, per scenario (medians of pair ratios).
rj::Value Report::ratios() {
  rj::Value ratios(rj::kArrayType);
  md_ << "\n## Ratios (median of pair-by-pair ratios, [p10, p90])\n\n"
      << "floor: plumb-floor linked statically and executed per verb (the yardstick of thin plumb); floor-warm: the "
         "same "
         "operations in a running process that plumb-shim, executed per verb, wakes and waits for (the yardstick of "
         "thick "
         "plumb). Both delete the pod's devices with one RTM_DELLINK, as plumb does; floor-naive: one RTM_DELLINK per "
         "device, as the reference plugins do (the kernel synchronises once per message).\n\n"
      << "| scenario | ADD reference/plumb | DEL reference/plumb | ADD plumb/floor-warm | DEL plumb/floor-warm | ADD "
         "plumb/floor | "
         "DEL plumb/floor | DEL plumb/floor-naive | DEL floor-naive/floor | ADD floor/floor-warm "
         "|\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (char s : o_.scenarios) {
    md_ << "| " << s;
    rj::Value o(rj::kObjectType);
    o.AddMember("scenario", str(std::string(1, s)), al_);
    for (auto [num, den, add, key] : {std::tuple{Way::Reference, Way::Plumb, true, "add_reference_over_plumb"},
                                      std::tuple{Way::Reference, Way::Plumb, false, "del_reference_over_plumb"},
                                      std::tuple{Way::Plumb, Way::FloorWarm, true, "add_plumb_over_floor_warm"},
                                      std::tuple{Way::Plumb, Way::FloorWarm, false, "del_plumb_over_floor_warm"},
                                      std::tuple{Way::Plumb, Way::Floor, true, "add_plumb_over_floor"},
                                      std::tuple{Way::Plumb, Way::Floor, false, "del_plumb_over_floor"},
                                      std::tuple{Way::Plumb, Way::FloorNaive, false, "del_plumb_over_floor_naive"},
                                      std::tuple{Way::FloorNaive, Way::Floor, false, "del_floor_naive_over_floor"},
                                      std::tuple{Way::Floor, Way::FloorWarm, true, "add_floor_over_floor_warm"}}) {
      auto r = pair_ratios("latency", s, 0, num, den, add);
      Dist d = dist(r);
      med_[s][key] = d.p50;
      md_ << " | " << ratio(d.p50) << " [" << ratio(pct(r, 0.1)) << ", " << ratio(pct(r, 0.9)) << "]";
      rj::Value ro = dist_json(d);
      ro.AddMember("p10", std::isnan(pct(r, 0.1)) ? rj::Value() : rj::Value(pct(r, 0.1)), al_);
      o.AddMember(rj::StringRef(key), ro, al_);
    }
    md_ << " |\n";
    ratios.PushBack(o, al_);
  }
  if (o_.scenarios == "xy") compare_networks();
  return ratios;
}

/// Two --conflist networks side by side: y's reference way over x's, and plumb's too, pair by
/// pair (the samples of one iteration ran back to back).
void Report::compare_networks() {
  md_ << "\n### Your two networks side by side: y (`" << o_.conflists[1] << "`) over x (`" << o_.conflists[0]
      << "`), median of pair-by-pair ratios [p10, p90]\n\n| way | ADD y/x | DEL y/x |\n|---|---|---|\n";
  rj::Value cmp(rj::kObjectType);
  for (Way w : {Way::Reference, Way::Plumb}) {
    md_ << "| " << way_name(w) << (w == Way::Reference ? " (each network's plugins)" : " (plumb running each)");
    rj::Value o(rj::kObjectType);
    for (bool add : {true, false}) {
      std::map<int, double> x, y;
      for (auto* s : sel("latency", 'x', w, 0)) x[s->iter] = static_cast<double>((add ? s->add : s->del).ns);
      for (auto* s : sel("latency", 'y', w, 0)) y[s->iter] = static_cast<double>((add ? s->add : s->del).ns);
      std::vector<double> r;
      for (auto& [it, v] : y) {
        if (x.count(it) && x[it] > 0) r.push_back(v / x[it]);
      }
      Dist d = dist(r);
      md_ << " | " << ratio(d.p50) << " [" << ratio(pct(r, 0.1)) << ", " << ratio(pct(r, 0.9)) << "]";
      o.AddMember(add ? "add_y_over_x" : "del_y_over_x", dist_json(d), al_);
    }
    md_ << " |\n";
    cmp.AddMember(str(way_name(w)), o, al_);
  }
  doc_.AddMember("networks_y_over_x", cmp, al_);
}

/// p50 ADD/DEL per way as the node fills, and each way's growth from the first to the last level.
rj::Value Report::fill() {
  rj::Value fillj(rj::kArrayType);
  md_ << "\n## p50 ADD as the node fills (scenario " << o_.fill_scenario << ", " << o_.fill_samples
      << " samples per level; fill pods of the same shape, made by plumb on plumb's node and by the reference chain on "
         "the reference node)\n\n| pods on the node |";
  for (Way w : kWays) md_ << " " << way_name(w) << " ADD p50 | " << way_name(w) << " DEL p50 |";
  md_ << " reference/plumb ADD | plumb/floor-warm ADD | plumb/floor-warm DEL | plumb/floor ADD |\n|---|";
  for (size_t i = 0; i < 2 * std::size(kWays) + 4; ++i) md_ << "---|";
  md_ << "\n";
  for (int level : o_.fill_levels) {
    md_ << "| " << level << " |";
    rj::Value o(rj::kObjectType);
    o.AddMember("pods_on_node", level, al_);
    for (Way w : kWays) {
      auto v = sel("fill", o_.fill_scenario, w, level);
      Dist a = dist(vals(v, true, Figure::Ms)), d = dist(vals(v, false, Figure::Ms));
      fill_p50_[w][level] = a.p50;
      md_ << " " << ms(a.p50) << " | " << ms(d.p50) << " |";
      rj::Value wo(rj::kObjectType);
      wo.AddMember("add_ms", dist_json(a), al_);
      wo.AddMember("del_ms", dist_json(d), al_);
      o.AddMember(str(way_name(w)), wo, al_);
    }
    for (auto [num, den, add, key] : {std::tuple{Way::Reference, Way::Plumb, true, "add_reference_over_plumb"},
                                      std::tuple{Way::Plumb, Way::FloorWarm, true, "add_plumb_over_floor_warm"},
                                      std::tuple{Way::Plumb, Way::FloorWarm, false, "del_plumb_over_floor_warm"},
                                      std::tuple{Way::Plumb, Way::Floor, true, "add_plumb_over_floor"}}) {
      const double v = dist(pair_ratios("fill", o_.fill_scenario, level, num, den, add)).p50;
      fill_med_[level][key] = v;
      md_ << " " << ratio(v) << " |";
      o.AddMember(rj::StringRef(key), std::isnan(v) ? rj::Value() : rj::Value(v), al_);
    }
    md_ << "\n";
    fillj.PushBack(o, al_);
  }
  const int lo = o_.fill_levels.front(), hi = o_.fill_levels.back();
  md_ << "\nGrowth of p50 ADD from " << lo << " to " << hi << " pods:";
  int hi_ref = lo;  // the reference node is filled to at most --fill-reference-max pods
  for (int level : o_.fill_levels) {
    if (level <= o_.fill_reference_max) hi_ref = level;
  }
  for (Way w : kWays) {
    const int top = w == Way::Reference ? hi_ref : hi;
    md_ << " " << way_name(w) << " " << ratio(fill_p50_[w][top] / fill_p50_[w][lo]) << (top != hi ? " (to " + std::to_string(top) + ")" : "") << ";";
  }
  md_ << "\n";
  if (hi_ref < hi) {
    md_ << "The reference node is filled to " << o_.fill_reference_max
        << " pods at most (--fill-reference-max): its ADDs slow down as its iptables rules grow, and filling it to "
        << hi << " would be most of the run.\n";
  }
  return fillj;
}

/// Pods/s and p50 ADD per way and worker count.
rj::Value Report::throughput() {
  rj::Value tputj(rj::kArrayType);
  md_ << "\n## ADD throughput (scenario " << o_.tput_scenario << ", " << o_.tput_pods << " pods per run, " << o_.tput_rounds
      << " runs of each, interleaved; pods/s = pods / wall time of the runs)\n\n| workers |";
  for (Way w : kWays) md_ << " " << way_name(w) << " pods/s | " << way_name(w) << " ADD p50 |";
  md_ << "\n|---|";
  for (size_t i = 0; i < 2 * std::size(kWays); ++i) md_ << "---|";
  md_ << "\n";
  for (int workers : o_.workers) {
    md_ << "| " << workers << " |";
    for (Way w : kWays) {
      for (auto& t : r_.tput) {
        if (t.way != w || t.workers != workers) continue;
        std::vector<double> l;
        for (auto x : t.add_ns) l.push_back(static_cast<double>(x) / 1e6);
        const double pps = static_cast<double>(t.pods) / (static_cast<double>(t.wall_ns) / 1e9);
        tput_pps_[w][workers] = pps;
        md_ << " " << fmt(1, pps) << " | " << ms(dist(l).p50) << " |";
        rj::Value o(rj::kObjectType);
        o.AddMember("way", str(way_name(w)), al_);
        o.AddMember("workers", workers, al_);
        o.AddMember("pods", t.pods, al_);
        o.AddMember("wall_s", static_cast<double>(t.wall_ns) / 1e9, al_);
        o.AddMember("pods_per_s", pps, al_);
        o.AddMember("add_ms", dist_json(dist(l)), al_);
        tputj.PushBack(o, al_);
      }
    }
    md_ << "\n";
  }
  return tputj;
}

/// The goals (issue 36): thick plumb against the warm floor, thin plumb against the static
/// floor; at an empty node (every scenario) and at the fullest fill level; (issue 32) thick plumb
/// on the API server against the embedded store; the phases' durations. A phase not run
/// (--phases) has no goal lines.
void Report::goals() {
  md_ << "\n## Goals (issues 36 and 32)\n\n";
  auto goal = [&](const std::string& what, double v, bool met) {
    md_ << "- " << what << ": " << (std::isnan(v) ? std::string("not measured") : ratio(v)) << " — "
        << (std::isnan(v) ? "n/a" : met ? "**met**" : "**not met**") << "\n";
  };
  auto api_goals = [&] {
    for (const auto& [latency, v] : api_goal_) {
      goal("API server at " + std::to_string(latency) +
               " ms per request: thick ADD api-thick/plumb (embedded store) ≤ 1.1×",
           v, v <= 1.1);
    }
  };
  if (is_user_scenario(o_.scenarios.front())) {
    md_ << "The goals are plumb's on its own scenarios a, b and c; the floors of a user's network are scenario a's, "
           "a yardstick, not a goal.\n";
    phases();
    return;
  }
  const bool lat = o_.runs("latency"), fil = o_.runs("fill");
  const int hi = o_.fill_levels.back();
  const std::string at_hi = " at " + std::to_string(hi) + " pods (scenario " + std::string(1, o_.fill_scenario) + ")";
  if (o_.thick) {
    for (char s : lat ? o_.scenarios : std::string()) {
      const double v = med_[s]["add_plumb_over_floor_warm"];
      goal(std::string("scenario ") + s + " ADD plumb/floor-warm ≤ 1.1× at 0 pods", v, v <= 1.1);
    }
    for (char s : lat ? o_.scenarios : std::string()) {
      const double v = med_[s]["del_plumb_over_floor_warm"];
      goal(std::string("scenario ") + s + " DEL plumb/floor-warm ≤ 1.0× at 0 pods", v, v <= 1.0);
    }
    if (fil) {
      const double add_hi = fill_med_[hi]["add_plumb_over_floor_warm"],
                   del_hi = fill_med_[hi]["del_plumb_over_floor_warm"];
      goal("ADD plumb/floor-warm ≤ 1.1×" + at_hi, add_hi, add_hi <= 1.1);
      goal("DEL plumb/floor-warm ≤ 1.0×" + at_hi, del_hi, del_hi <= 1.0);
    }
    if (o_.runs("throughput")) {
      const int w = o_.workers.back();
      const double share = tput_pps_[Way::Plumb][w] / tput_pps_[Way::FloorWarm][w];
      goal("throughput with " + std::to_string(w) + " workers: plumb pods/s ≥ 0.9× floor-warm's", share, share >= 0.9);
    }
  } else {
    for (char s : lat ? o_.scenarios : std::string()) {
      const double v = med_[s]["add_plumb_over_floor"];
      goal(std::string("scenario ") + s + " thin ADD plumb/floor ≤ 1.2× at 0 pods", v, v <= 1.2);
    }
    if (fil) {
      const double add_hi = fill_med_[hi]["add_plumb_over_floor"];
      goal("thin ADD plumb/floor ≤ 1.2×" + at_hi, add_hi, add_hi <= 1.2);
    }
  }
  if (lat) {
    const char rich = o_.scenarios.back();
    const double naive = med_[rich]["del_plumb_over_floor_naive"];
    goal(std::string("scenario ") + rich + " DEL plumb/floor-naive < 1.0× (below the naive floor)", naive, naive < 1.0);
  }
  api_goals();
  phases();
}

/// How long each phase and the whole run took.
void Report::phases() {
  md_ << "\nPhases: ";
  for (auto& [k, v] : r_.phase_secs) md_ << k << " " << fmt(0, v) << " s; ";
  md_ << "total " << fmt(0, static_cast<double>(r_.elapsed_ns) / 1e9) << " s.\n";
}

void Report::write_files() {
  std::filesystem::create_directories(o_.out_dir);
  rj::StringBuffer sb;
  rj::PrettyWriter<rj::StringBuffer> writer(sb);
  writer.SetMaxDecimalPlaces(4);
  doc_.Accept(writer);
  write_text(o_.out_dir + "/results.json", std::string(sb.GetString()) + "\n");
  write_text(o_.out_dir + "/results.md", md_.str());
}

/// p50 ADD against pods on the node, one line per way (log scale: the ways differ by orders of
/// magnitude).
void Report::plot() {
  std::ostringstream dat;
  dat << "# pods_on_node";
  for (Way w : kWays) dat << " " << way_name(w) << "_p50_ms";
  dat << "\n";
  for (int level : o_.fill_levels) {
    dat << level;
    for (Way w : kWays) dat << " " << fmt(4, fill_p50_[w][level]);
    dat << "\n";
  }
  write_text(o_.out_dir + "/latency_vs_pods.dat", dat.str());
  std::string gp = "set terminal pngcairo size 960,600 font 'sans,11'\n"
                   "set output '" + o_.out_dir + "/latency_vs_pods.png'\n"
                   "set title 'Pod ADD latency (scenario " + std::string(1, o_.fill_scenario) + ", p50) as the node fills — " +
                   r_.started_utc + "'\n"
                   "set xlabel 'pods already on the node'\nset ylabel 'p50 ADD latency (ms, log scale)'\n"
                   "set logscale y\nset grid\nset key top left\nset xtics (";
  for (size_t i = 0; i < o_.fill_levels.size(); ++i) gp += (i ? "," : "") + std::to_string(o_.fill_levels[i]);
  gp += ")\nplot '" + o_.out_dir +
        "/latency_vs_pods.dat' using 1:3 with linespoints lw 2 title 'reference chain', \\\n"
        "     '' using 1:2 with linespoints lw 2 title 'plumb', \\\n"
        "     '' using 1:4 with linespoints lw 2 title 'floor (static, exec per verb)', \\\n"
        "     '' using 1:5 with linespoints lw 2 title 'floor-warm (running, woken by a static shim)'\n";
  write_text(o_.out_dir + "/latency_vs_pods.gp", gp);
  Proc g = spawn({"/usr/bin/gnuplot", o_.out_dir + "/latency_vs_pods.gp"}, {"PATH=/usr/bin:/bin"}, "");
  if (!g.ok()) throw std::runtime_error("gnuplot failed (install gnuplot-nox; scripts/bench does): " + g.describe());
}

/// Process start-up: wall time, CPU and peak RSS of VERSION per binary.
rj::Value Report::startup() {
  rj::Value out(rj::kArrayType);
  if (r_.startup.empty()) return out;
  md_ << "\n## Process start-up (CNI VERSION: start, library loading, exit; the floor: plumb-floor started to exit at "
         "once; "
      << o_.samples
      << " interleaved samples each)\n\n| binary | wall p50 ms | wall p90 ms | CPU p50 ms | peak RSS MiB "
         "|\n|---|---|---|---|---|\n";
  std::vector<std::string> names;
  for (const auto& s : r_.startup) {
    if (std::find(names.begin(), names.end(), s.binary) == names.end()) names.push_back(s.binary);
  }
  for (const auto& name : names) {
    std::vector<double> wall, cpu, rss;
    for (const auto& s : r_.startup) {
      if (s.binary != name) continue;
      wall.push_back(static_cast<double>(s.cost.ns) / 1e6);
      cpu.push_back(static_cast<double>(s.cost.cpu_us) / 1e3);
      rss.push_back(static_cast<double>(s.cost.rss_kib) / 1024.0);
    }
    Dist w = dist(wall), c = dist(cpu), r = dist(rss);
    md_ << "| " << name << " | " << ms(w.p50) << " | " << ms(w.p90) << " | " << ms(c.p50) << " | " << fmt(1, r.max) << " |\n";
    rj::Value o(rj::kObjectType);
    o.AddMember("binary", str(name), al_);
    o.AddMember("wall_ms", dist_json(w), al_);
    o.AddMember("cpu_ms", dist_json(c), al_);
    o.AddMember("peak_rss_mib", dist_json(r), al_);
    out.PushBack(o, al_);
  }
  return out;
}

void Report::run() {
  header(std::string(plumb::text::trim(read_text("/proc/loadavg"))));
  rj::Value summary(rj::kObjectType);
  if (o_.runs("latency")) {
    summary.AddMember("latency", latency(), al_);
    summary.AddMember("ratios", ratios(), al_);
  }
  if (o_.runs("fill")) summary.AddMember("fill", fill(), al_);
  if (o_.runs("throughput")) summary.AddMember("throughput", throughput(), al_);
  if (o_.runs("startup")) summary.AddMember("startup", startup(), al_);
  if (o_.runs("api")) summary.AddMember("api_server", api_report(r_, md_, al_, api_goal_), al_);
  goals();
  doc_.AddMember("summary", summary, al_);
  doc_.AddMember("samples", samples(), al_);
  write_files();
  if (o_.runs("fill")) plot();
  std::fputs(md_.str().c_str(), stdout);
}

}  // namespace

void report(const Results& r) {
  Report rep(r);
  rep.run();
}

}  // namespace bench
