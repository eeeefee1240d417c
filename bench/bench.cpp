// The bench's run (bench.hpp): node set-up, pods and their sandboxes, the preflight and the
// three measuring phases.
#include <rapidjson/document.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench/bench.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"

namespace bench {

namespace fs = std::filesystem;

std::vector<Way> Bench::order(int iter, const std::vector<Way>& ways) {
  std::vector<Way> w = ways;
  std::rotate(w.begin(), w.begin() + (iter % static_cast<int>(w.size())), w.end());
  return w;
}

namespace {

const std::vector<Way> kMainWays(std::begin(kWays), std::end(kWays));
const std::vector<Way> kAllLatencyWays(std::begin(kLatencyWays), std::end(kLatencyWays));

}  // namespace

void Bench::setup() {
  started_utc_ = [] {
    time_t t = time(nullptr);
    char buf[64];
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    return std::string(buf);
  }();
  load_start_ = read_text("/proc/loadavg");
  for (const std::string& bin : {o_.plumb, o_.floor, o_.shim}) {
    if (access(bin.c_str(), X_OK) != 0) throw std::runtime_error(bin + " is not an executable (build it: scripts/bench does)");
  }
  bpffs_ = scratch_ + "/bpf/plumb";
  for (NodeNs* n : {&plumb_, &ref_}) {
    n->dir = scratch_ + "/" + n->name;
    fs::create_directories(n->dir + "/ipam");
    create_netns(n->name);
    n->ns = must(plumb::netns::Netns::open("/run/netns/" + n->name), "open node netns");
    InNetns in(*n->ns);
    // The macvlan master: one end of a veth pair (this kernel has no dummy driver), both ends up.
    auto nl = must(plumb::netlink::Socket::open(), "open rtnetlink in " + n->name);
    plumb::link::VethSpec spec{"mst0", "mst1", -1, 0, std::nullopt, std::nullopt};
    if (auto st = plumb::link::create_veth(nl, spec); !st) throw std::runtime_error("create mst0: " + st.error().text());
    for (const char* name : {"mst0", "mst1"}) {
      auto l = must(plumb::link::get(nl, name), "look up master");
      plumb::link::LinkChange up;
      up.up = true;
      if (auto st = plumb::link::modify(nl, l->index, up); !st) throw std::runtime_error(st.error().text());
    }
  }
  // plumb's node: default network conflists per scenario, NADs and pod manifests in its store.
  const std::string ipam_p = plumb_.dir + "/ipam";
  for (char s : std::string("ac")) write_text(plumb_.dir + "/default-" + s + ".conflist", default_conflist(ipam_p, s));
  for (size_t i = 0; i < o_.conflists.size(); ++i) {
    const char s = "xy"[i];
    const std::string& file = o_.conflists[i];
    user_conflist_[s] = read_text(file);
    if (user_conflist_[s].empty()) throw std::runtime_error("--conflist " + file + " cannot be read or is empty");
    // plumb runs the same network; its host-local allocations go to its own node's directory
    // (the reference way's stay where the file says: its default is under a private tmpfs).
    write_text(plumb_.dir + "/default-" + s + ".conflist", with_data_dir(user_conflist_[s], plumb_.dir + "/ipam-" + s));
  }
  auto nad = [](const std::string& name, const std::string& config) {
    return "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name +
           "\n  namespace: default\nspec:\n  config: '" + config + "'\n";
  };
  write_text(plumb_.dir + "/store/nads/networks.yaml",
             nad("sec-bridge", sec_bridge_json(ipam_p)) + "---\n" + nad("sec-macvlan", sec_macvlan_json(ipam_p)));
  fs::create_directories(plumb_.dir + "/store/pods/default");
  fs::create_directories(plumb_.dir + "/state");
  fs::create_directories(plumb_.dir + "/net.d");
  if (o_.thick) start_daemon(daemon_, plumb_.dir + "/daemon", {});
  start_floor_server();
  find_versions();
}

namespace {

/// The first line of `text`, trimmed.
std::string first_line(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  const size_t b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

}  // namespace

void Bench::find_versions() {
  const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  Proc v = spawn({o_.plumb, "--version"}, env, "");
  if (!v.ok()) throw std::runtime_error(o_.plumb + " --version failed: " + v.describe());
  versions_["plumb"] = first_line(v.out);
  // The reference plugins: the Debian package that installed them, else the plugin's own
  // about text (a CNI plugin run without CNI_COMMAND prints its name and version).
  rapidjson::Document net;
  net.Parse(reference_default_conflist(o_.scenarios.back()).c_str());
  std::string type = "bridge";
  if (!net.HasParseError() && net.IsObject() && net.HasMember("plugins") && net["plugins"].IsArray() &&
      !net["plugins"].Empty() && net["plugins"][0].IsObject() && net["plugins"][0].HasMember("type") &&
      net["plugins"][0]["type"].IsString()) {
    type = net["plugins"][0]["type"].GetString();
  } else if (!net.HasParseError() && net.IsObject() && net.HasMember("type") && net["type"].IsString()) {
    type = net["type"].GetString();
  }
  const std::string path = o_.cni_path + "/" + type;
  Proc owner = spawn({"/usr/bin/dpkg-query", "-S", path}, env, "");
  std::string text;
  if (owner.ok()) {
    const std::string pkg = first_line(owner.out).substr(0, owner.out.find(':'));
    Proc ver = spawn({"/usr/bin/dpkg-query", "-W", "-f=${Version}", pkg}, env, "");
    if (ver.ok()) text = pkg + " " + first_line(ver.out);
  }
  Proc about = spawn({path}, env, "");
  const std::string about_line = first_line(about.err.empty() ? about.out : about.err);
  if (!about_line.empty()) text += (text.empty() ? "" : "; ") + type + ": " + about_line;
  versions_["reference"] = text.empty() ? "unknown (" + path + ")" : text;
}

Pod Bench::new_pod(char scenario, Way w, const std::string& tag) {
  Pod p;
  const int n = seq_++;
  p.scenario = scenario;
  p.way = w;
  p.netns = "pod-" + std::to_string(n);
  p.name = "pod-" + std::to_string(n);
  p.cid = std::string(tag) + "-" + way_name(w) + "-" + std::to_string(n);
  p.slot = slot_++;
  if (p.slot >= 0x10000) throw std::runtime_error("more than 65536 floor pods in one run");
  if (tag == "resident") {  // pods that stay on the node: host ports 20000.. per node
    p.host_port = 20000 + filled_[w]++;
  } else {
    int port = port_++;
    if (port > 60000) port_ = 40000;
    p.host_port = port;
  }
  return p;
}

void Bench::make_sandbox(Pod& p) {
  create_netns(p.netns);
  if (p.way == Way::Plumb) {
    std::string yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + p.name + "\n  namespace: default\n";
    if (has_secondaries(p.scenario)) {
      yaml += "  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\": \"sec-bridge\", \"interface\": \"net1\"}, "
              "{\"name\": \"sec-macvlan\", \"interface\": \"net2\"}]'\n";
    }
    write_text(plumb_.dir + "/store/pods/default/" + p.name + ".yaml", yaml);
  }
}

void Bench::drop_sandbox(Pod& p) {
  delete_netns(p.netns);
  if (p.way == Way::Plumb) ::unlink((plumb_.dir + "/store/pods/default/" + p.name + ".yaml").c_str());
  if (is_api(p.way)) ::unlink((api_.dir + "/objects/pods/default/" + p.name + ".json").c_str());
}

Sample Bench::one_sample(const std::string& phase, char scenario, Way w, int fill, int iter, bool warmup) {
  Pod p = new_pod(scenario, w, phase);
  make_sandbox(p);
  Sample s{phase, scenario, w, fill, iter, warmup, {}, {}, 0, {}};
  {
    InNetns in(*node_of(w).ns);
    s.add = add(p);
  }
  verify_added(p);
  {
    InNetns in(*node_of(w).ns);
    s.del = del(p);
  }
  verify_deleted(p);
  drop_sandbox(p);
  return s;
}

int64_t Bench::parallel(int n, int workers, NodeNs& node, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::mutex emu;
  std::string error;
  std::vector<std::thread> threads;
  for (int t = 0; t < workers; ++t) {
    threads.emplace_back([&] {
      try {
        InNetns in(*node.ns);
        ++ready;
        while (!go.load()) std::this_thread::yield();
        for (int i; (i = next++) < n;) {
          {
            std::lock_guard<std::mutex> l(emu);
            if (!error.empty()) return;
          }
          fn(i);
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> l(emu);
        if (error.empty()) error = e.what();
        ++ready;
      }
    });
  }
  while (ready.load() < workers) std::this_thread::yield();
  const int64_t t0 = now_ns();
  go = true;
  for (auto& t : threads) t.join();
  const int64_t wall = now_ns() - t0;
  if (!error.empty()) throw std::runtime_error(error);
  return wall;
}


void Bench::preflight() {
  // One pod per scenario and way, plumb first: its first pods create what the floor takes as
  // given (bridges, gateway address, nftables table, pinned programs). Any failure is reported
  // per scenario; nothing is silently skipped.
  std::vector<std::string> problems;
  std::string scenarios = o_.scenarios;
  // The floor of scenarios x and y is a's: plumb's first scenario-a pod makes the node objects it needs.
  const bool user_only = is_user_scenario(scenarios.front());
  if (user_only) scenarios.insert(0, "a");
  for (char s : scenarios) {
    for (Way w : kWays) {
      if (s == 'a' && user_only && w != Way::Plumb) continue;
      progress_.set(std::string("preflight: scenario ") + s + ", " + way_name(w), true);
      try {
        Sample smp = one_sample("preflight", s, w, 0, -1, true);
        (void)smp;
      } catch (const std::exception& e) {
        std::string msg = e.what();
        std::string why;
        if (auto pos = msg.find("is not implemented by plumb"); pos != std::string::npos && w == Way::Plumb) {
          auto q = msg.rfind("plugin type", pos);
          why = "plumb has no native driver for " + (q != std::string::npos ? msg.substr(q, pos - q) : std::string("a plugin type")) +
                "(see drivers/registry.cpp)";
        } else if (w == Way::Reference && msg.find("No such file") != std::string::npos) {
          why = "a reference plugin is missing from " + o_.cni_path + " (install containernetworking-plugins)";
        } else {
          why = way_name(w) + std::string(" failed");
        }
        problems.push_back(std::string("scenario (") + s + ") cannot run: " + why + "\n    " + msg);
        break;  // the other ways of this scenario depend on plumb's node set-up
      }
    }
  }
  if (!problems.empty()) {
    std::string all = "preflight failed; no numbers were taken:\n";
    for (auto& p : problems) all += "  " + p + "\n";
    all += "  Run only the scenarios that work with --scenarios (e.g. --scenarios a) to measure those.";
    throw std::runtime_error(all);
  }
  progress_.line("preflight: every scenario runs in every way (" + o_.scenarios + ")");
}

void Bench::phase_latency() {
  const int64_t t0 = now_ns();
  const int iters = o_.warmup + o_.samples;
  for (int it = 0; it < iters; ++it) {
    for (size_t si = 0; si < o_.scenarios.size(); ++si) {
      const char s = o_.scenarios[si];
      for (Way w : order(it + static_cast<int>(si), kAllLatencyWays)) {
        progress_.set("latency: iteration " + std::to_string(it + 1) + "/" + std::to_string(iters) + " (" +
                      std::to_string(o_.warmup) + " warm-up), scenario " + s + ", " + way_name(w));
        record(one_sample("latency", s, w, 0, it - o_.warmup, it < o_.warmup));
      }
    }
  }
  phase_secs_["latency"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("latency: done in " + fmt(0, phase_secs_["latency"]) + " s");
}

/// Adds a run to its (way, worker count)'s totals: pods, wall time and every ADD's latency.
void Bench::add_tput_run(Tput run) {
  for (Tput& t : tput_) {
    if (t.way != run.way || t.workers != run.workers) continue;
    t.pods += run.pods;
    t.wall_ns += run.wall_ns;
    t.add_ns.insert(t.add_ns.end(), run.add_ns.begin(), run.add_ns.end());
    return;
  }
  tput_.push_back(std::move(run));
}

void Bench::phase_throughput() {
  const int64_t t0 = now_ns();
  int round = 0;
  for (int run = 1; run <= o_.tput_rounds; ++run) {
    for (int workers : o_.workers) {
      for (Way w : order(round++, kMainWays)) add_tput_run(throughput_run(run, w, workers));
    }
  }
  phase_secs_["throughput"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("throughput: done in " + fmt(0, phase_secs_["throughput"]) + " s");
}

/// One throughput run: --tput-pods pods ADDed by `workers` at once (timed), verified, then DELeted.
Tput Bench::throughput_run(int run, Way w, int workers) {
  const char s = o_.tput_scenario;
  progress_.set("throughput: run " + std::to_string(run) + "/" + std::to_string(o_.tput_rounds) + ", " + std::string(way_name(w)) +
                    ", " + std::to_string(workers) + " workers, " + std::to_string(o_.tput_pods) + " pods of scenario " + s,
                true);
  std::vector<Pod> pods;
  for (int i = 0; i < o_.tput_pods; ++i) {
    pods.push_back(new_pod(s, w, "tput"));
    make_sandbox(pods.back());
  }
  std::vector<int64_t> lat(pods.size());
  const int64_t wall = parallel(o_.tput_pods, workers, node_of(w), [&](int i) { lat[i] = add(pods[i]).ns; });
  for (auto& p : pods) verify_added(p);
  parallel(o_.tput_pods, workers, node_of(w), [&](int i) { del(pods[i]); });
  for (auto& p : pods) {
    verify_deleted(p);
    drop_sandbox(p);
  }
  return Tput{w, workers, o_.tput_pods, wall, lat};
}

/// Adds resident pods to both nodes (the floor shares plumb's node and its pods) until each has
/// `level` (the reference node at most --fill-reference-max), at once and untimed, every ADD
/// verified.
void Bench::fill_nodes(std::map<Way, std::vector<Pod>>& fill, int current_all, int level_all) {
  const char s = o_.fill_scenario;
  std::vector<std::thread> fillers;
  std::mutex emu;
  std::string error;
  for (Way w : {Way::Plumb, Way::Reference}) {
    const int cap = w == Way::Reference ? o_.fill_reference_max : level_all;
    const int current = std::min(current_all, cap), level = std::min(level_all, cap);
    if (level <= current) continue;
    auto& pods = fill[w];
    const size_t before = pods.size();
    for (int i = current; i < level; ++i) {
      pods.push_back(new_pod(s, w, "resident"));
      make_sandbox(pods.back());
    }
    std::vector<Pod>* vec = &pods;  // map nodes are stable: no insertion while the fillers run
    fillers.emplace_back([&, w, vec, before, current, level] {
      try {
        std::atomic<int> done{0};
        parallel(level - current, o_.fill_workers, node_of(w), [&](int i) {
          Pod& p = (*vec)[before + static_cast<size_t>(i)];
          add(p);
          verify_added(p);
          int d = ++done;
          progress_.set("fill: " + std::string(way_name(w)) + " node " + std::to_string(current + d) + "/" +
                        std::to_string(level) + " pods");
        });
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> l(emu);
        if (error.empty()) error = e.what();
      }
    });
  }
  for (auto& t : fillers) t.join();
  if (!error.empty()) throw std::runtime_error(error);
}

void Bench::phase_fill() {
  const int64_t t0 = now_ns();
  const char s = o_.fill_scenario;
  std::map<Way, std::vector<Pod>> fill;  // the pods that stay on each node
  int current = 0;
  for (size_t li = 0; li < o_.fill_levels.size(); ++li) {
    const int level = o_.fill_levels[li];
    fill_nodes(fill, current, level);
    current = level;
    for (int it = 0; it < o_.fill_samples; ++it) {
      for (Way w : order(it, kMainWays)) {
        if (w == Way::Reference && level > o_.fill_reference_max) continue;  // not filled that far
        progress_.set("fill: " + std::to_string(level) + " pods on the node, sample " + std::to_string(it + 1) + "/" +
                      std::to_string(o_.fill_samples) + ", " + way_name(w));
        record(one_sample("fill", s, w, level, it, false));
      }
    }
    progress_.line("fill: " + std::to_string(level) + " pods on each node measured");
  }
  // The fill pods are not deleted one by one: the nodes and their pods go with the namespaces.
  for (auto& [w, pods] : fill) {
    for (auto& p : pods) drop_sandbox(p);
  }
  phase_secs_["fill"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("fill: done in " + fmt(0, phase_secs_["fill"]) + " s");
}

void Bench::phase_startup() {
  const int64_t t0 = now_ns();
  // The reference plugins of the richest scenario's default network (or of the user's conflist).
  std::vector<std::pair<std::string, std::string>> bins = {{"plumb", o_.thick ? o_.shim : o_.plumb},
                                                           {"floor", o_.floor}};
  rapidjson::Document net;
  net.Parse(reference_default_conflist(o_.scenarios.back()).c_str());
  if (!net.HasParseError() && net.IsObject() && net.HasMember("plugins") && net["plugins"].IsArray()) {
    for (const auto& p : net["plugins"].GetArray()) {
      if (p.IsObject() && p.HasMember("type") && p["type"].IsString()) bins.emplace_back(p["type"].GetString(), o_.cni_path + "/" + p["type"].GetString());
    }
  } else if (!net.HasParseError() && net.IsObject() && net.HasMember("type") && net["type"].IsString()) {
    bins.emplace_back(net["type"].GetString(), o_.cni_path + "/" + net["type"].GetString());
  }
  const std::string input = R"({"cniVersion": "1.0.0"})";
  for (int it = 0; it < o_.warmup + o_.samples; ++it) {
    for (size_t k = 0; k < bins.size(); ++k) {
      const auto& [name, path] = bins[(k + static_cast<size_t>(it)) % bins.size()];
      progress_.set("start-up: " + name + " VERSION, iteration " + std::to_string(it + 1));
      Startup s{name, {}};
      const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND=VERSION",
                                            "PLUMB_DAEMON_SOCKET=" + daemon_.socket};
      Proc r;
      if (name == "plumb") {
        r = run_plumb(env, input, s.cost);
      } else if (name == "floor") {
        r = spawn({path, "START"}, env, "");  // plumb-floor's start and exit (static, glibc)
        s.cost.add(r);
      } else {
        r = spawn({path}, env, input);
        s.cost.add(r);
      }
      if (!r.ok()) throw std::runtime_error(name + " VERSION failed: " + r.describe());
      if (it < o_.warmup) continue;
      startup_.push_back(s);
    }
  }
  phase_secs_["startup"] = static_cast<double>(now_ns() - t0) / 1e9;
}

void Bench::record(const Sample& s) {
  std::lock_guard<std::mutex> l(mu_);
  samples_.push_back(s);
}

Results Bench::results() const {
  Results r;
  r.options = &o_;
  r.samples = samples_;
  r.tput = tput_;
  r.startup = startup_;
  r.started_utc = started_utc_;
  r.load_start = load_start_;
  r.phase_secs = phase_secs_;
  r.elapsed_ns = progress_.elapsed_ns();
  r.versions = versions_;
  return r;
}

}  // namespace bench
