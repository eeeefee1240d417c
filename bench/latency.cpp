// plumb-bench: pod set-up latency of plumb against the reference CNI plugins and the kernel
// floor, measured in one run on one machine (issue 8; bench/README.md explains the output).
//
// Everything happens inside a private network + mount namespace the harness creates at start
// (unshare), with a tmpfs on /run/netns and a private bpffs: two "node" namespaces (one for plumb
// and the floor, one for the reference chain, so each way fills its own node with its own pods)
// and one namespace per pod. Nothing is created in the machine's own network namespace.
//
// Three ways, interleaved sample by sample (the order rotates every iteration):
//   plumb      the real binary, run exactly as a runtime runs it (CNI_* environment, config on
//              stdin; secondary networks from NADs and pod annotations in plumb's local store).
//   reference  Debian's containernetworking-plugins driven the way Multus delegates: one
//              conflist per attachment, cniVersion/name injected, prevResult chained,
//              capabilities turned into runtimeConfig, each plugin executed with CNI_* env.
//   floor      plumb-floor (bench/floor.cpp): only the kernel operations the attachment needs.
// Every ADD is verified from the kernel (each interface present, up, with its addresses) before
// it is counted and every DEL verified (only lo left); any failure stops the run with the
// plugin's output. Timing: CLOCK_MONOTONIC from just before posix_spawn to wait4's return;
// peak RSS and CPU from wait4's rusage.
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/kernel/addr.hpp"
#include "engine/base/ip.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/kernel/netns.hpp"

#ifndef PLUMB_BENCH_PLUMB
#define PLUMB_BENCH_PLUMB "plumb"
#endif
#ifndef PLUMB_BENCH_FLOOR
#define PLUMB_BENCH_FLOOR "plumb-floor"
#endif

namespace bench {
namespace {

namespace fs = std::filesystem;
using plumb::IpAddr;

// ---------------------------------------------------------------------------------------------
// Settings

struct Options {
  bool quick = false;
  int samples = 40;                    // measured ADD+DEL pairs per scenario and way
  int warmup = 3;                      // discarded iterations before them
  std::string scenarios = "abc";
  std::vector<int> fill_levels = {0, 100, 500, 1000};
  int fill_samples = 10;               // per fill level and way
  char fill_scenario = 'c';            // shape of the measured and resident pods (richest of --scenarios)
  int fill_workers = 4;                // concurrent ADDs while filling (untimed)
  std::vector<int> workers = {1, 2, 4};
  int tput_pods = 16;                  // pods ADDed per (way, worker count)
  char tput_scenario = 'c';            // richest of --scenarios
  std::string out_dir = "bench/out";
  std::string plumb = PLUMB_BENCH_PLUMB;
  std::string floor = PLUMB_BENCH_FLOOR;
  std::string cni_path = "/usr/lib/cni";
  std::string scratch_parent = "/var/tmp";
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: plumb-bench [--quick] [--samples N] [--warmup N] [--scenarios abc] [--fill 0,100,500,1000]\n"
               "                   [--fill-samples N] [--fill-workers N] [--workers 1,2,4] [--tput-pods N]\n"
               "                   [--out DIR] [--plumb PATH] [--floor PATH] [--cni-path DIR] [--scratch DIR]\n"
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
    else if (k == "--workers") o.workers = int_list(next());
    else if (k == "--tput-pods") o.tput_pods = std::stoi(next());
    else if (k == "--out") o.out_dir = next();
    else if (k == "--plumb") o.plumb = next();
    else if (k == "--floor") o.floor = next();
    else if (k == "--cni-path") o.cni_path = next();
    else if (k == "--scratch") o.scratch_parent = next();
    else usage(2);
  }
  for (char c : o.scenarios) {
    if (c != 'a' && c != 'b' && c != 'c') throw std::runtime_error(std::string("unknown scenario '") + c + "' (a, b, c)");
  }
  if (o.samples < 1 || o.warmup < 0 || o.fill_samples < 1 || o.fill_workers < 1 || o.tput_pods < 1) {
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

// ---------------------------------------------------------------------------------------------
// Small utilities

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::trunc);
  f << data;
  if (!f) throw std::runtime_error("write " + path);
}

void write_proc(const std::string& path, const char* value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, value, std::strlen(value));
  int err = errno;
  ::close(fd);
  if (n < 0) throw std::runtime_error("write " + path + ": " + std::strerror(err));
}

/// `v` with `decimals` digits after the point ("%.*f").
std::string fmt(int decimals, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

template <class T>
T must(plumb::Result<T> r, const std::string& what) {
  if (!r) throw std::runtime_error(what + ": " + r.error().text());
  return std::move(*r);
}

std::string json_dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

// ---------------------------------------------------------------------------------------------
// Progress line: rewritten in place on a terminal, one line every 10 s otherwise.

class Progress {
 public:
  Progress() : tty_(isatty(2) != 0), start_(now_ns()) {}
  void set(const std::string& text, bool force = false) {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t t = now_ns();
    if (!force && !tty_ && t - last_ < 10'000'000'000) return;
    if (!force && tty_ && t - last_ < 100'000'000) return;
    last_ = t;
    const int secs = static_cast<int>((t - start_) / 1'000'000'000);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[%2d:%02d] %s", secs / 60, secs % 60, text.c_str());
    } else {
      std::fprintf(stderr, "[%2d:%02d] %s\n", secs / 60, secs % 60, text.c_str());
    }
    std::fflush(stderr);
  }
  void line(const std::string& text) {
    std::lock_guard<std::mutex> l(mu_);
    const int secs = static_cast<int>((now_ns() - start_) / 1'000'000'000);
    std::fprintf(stderr, "%s[%2d:%02d] %s\n", tty_ ? "\r\033[K" : "", secs / 60, secs % 60, text.c_str());
    std::fflush(stderr);
  }
  int64_t elapsed_ns() const { return now_ns() - start_; }

 private:
  std::mutex mu_;
  bool tty_;
  int64_t start_;
  int64_t last_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Processes: posix_spawn (CLONE_VFORK) with pipes, wait4 for the child's rusage.

struct Proc {
  int status = -1;          // raw wait status
  int64_t wall_ns = 0;      // posix_spawn .. wait4 return
  long maxrss_kib = 0;      // ru_maxrss: the child's peak RSS (its waited-for descendants included)
  int64_t cpu_us = 0;       // user + system CPU of the child and its waited-for descendants
  std::string out, err;
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    std::string s = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status));
    return s + "\n  stdout: " + out + "\n  stderr: " + err;
  }
};

Proc spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& input) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  std::vector<char*> av, ev;
  for (auto& s : argv) av.push_back(const_cast<char*>(s.c_str()));
  av.push_back(nullptr);
  for (auto& s : env) ev.push_back(const_cast<char*>(s.c_str()));
  ev.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);

  Proc p;
  const int64_t t0 = now_ns();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
  // Inputs are configs of a few KiB: far below the pipe's capacity, so this never blocks.
  size_t off = 0;
  while (off < input.size()) {
    ssize_t n = ::write(in[1], input.data() + off, input.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed stdin early; its exit status tells the rest
    off += static_cast<size_t>(n);
  }
  ::close(in[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&p.out, &p.err};
  int open_fds = 2;
  char buf[16384];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  rusage ru{};
  while (wait4(pid, &p.status, 0, &ru) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("wait4: ") + std::strerror(errno));
  }
  p.wall_ns = now_ns() - t0;
  p.maxrss_kib = ru.ru_maxrss;
  p.cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Namespaces

/// Enters `fd`'s network namespace for the calling thread until destruction.
class InNetns {
 public:
  explicit InNetns(const plumb::netns::Netns& ns) : guard_(must(plumb::netns::Guard::enter(ns), "enter " + ns.path())) {}

 private:
  plumb::netns::Guard guard_;
};

void lo_up() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error(std::string("bring lo up: ") + std::strerror(err));
}

/// Creates /run/netns/<name>: a new network namespace (made by this thread, which then returns to
/// where it was) with lo up and IPv6 duplicate address detection off for every interface (so no
/// way waits for a DAD timer: the reference macvlan plugin otherwise sleeps 1-2 s per ADD).
void create_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0444);
  if (fd < 0) throw std::runtime_error("create " + path + ": " + std::strerror(errno));
  ::close(fd);
  auto orig = must(plumb::netns::Netns::current(), "open current netns");
  if (unshare(CLONE_NEWNET) != 0) throw std::runtime_error(std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno));
  std::string error;
  if (mount("/proc/thread-self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    error = "bind-mount " + path + ": " + std::strerror(errno);
  } else {
    try {
      lo_up();
      write_proc("/proc/sys/net/ipv6/conf/all/accept_dad", "0");
      write_proc("/proc/sys/net/ipv6/conf/default/accept_dad", "0");
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (setns(orig.fd(), CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "plumb-bench: cannot return to the private root namespace: %s\n", std::strerror(errno));
    std::abort();  // continuing in the wrong namespace would measure (and change) the wrong node
  }
  if (!error.empty()) throw std::runtime_error(error);
}

void delete_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  umount2(path.c_str(), MNT_DETACH);
  ::unlink(path.c_str());
}

/// Leaves the machine's namespaces: new network and mount namespaces, mounts private, a tmpfs on
/// /run/netns, a private bpffs under `bpf_dir`. Must run before any thread exists.
void enter_private_root(const std::string& bpf_dir) {
  if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
    throw std::runtime_error(std::string("unshare(CLONE_NEWNET|CLONE_NEWNS) (the bench must run as root): ") +
                             std::strerror(errno));
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    throw std::runtime_error(std::string("make / private: ") + std::strerror(errno));
  }
  ::mkdir("/run/netns", 0755);
  if (mount("tmpfs", "/run/netns", "tmpfs", 0, "mode=0755") != 0) {
    throw std::runtime_error(std::string("mount tmpfs on /run/netns: ") + std::strerror(errno));
  }
  fs::create_directories(bpf_dir);
  if (mount("bpf", bpf_dir.c_str(), "bpf", 0, "mode=0700") != 0) {
    throw std::runtime_error("mount a private bpffs on " + bpf_dir + ": " + std::strerror(errno));
  }
  lo_up();
}

// ---------------------------------------------------------------------------------------------
// What is measured

enum class Way { Plumb = 0, Reference = 1, Floor = 2 };
constexpr Way kWays[] = {Way::Plumb, Way::Reference, Way::Floor};
const char* way_name(Way w) {
  switch (w) {
    case Way::Plumb: return "plumb";
    case Way::Reference: return "reference";
    case Way::Floor: return "floor";
  }
  return "?";
}

/// One invocation's cost: for the reference chain, the sum of wall time of its plugin
/// executions, the largest peak RSS among them and the sum of their CPU time.
struct Cost {
  int64_t ns = 0;
  long rss_kib = 0;
  int64_t cpu_us = 0;
  int procs = 0;
  void add(const Proc& p) {
    ns += p.wall_ns;
    rss_kib = std::max(rss_kib, p.maxrss_kib);
    cpu_us += p.cpu_us;
    ++procs;
  }
};

struct Sample {
  std::string phase;  // "latency", "fill", "throughput"
  char scenario = 'a';
  Way way = Way::Plumb;
  int fill = 0;
  int iter = 0;
  bool warmup = false;
  Cost add, del;
};

/// One pod being attached.
struct Pod {
  std::string netns;  // name under /run/netns
  std::string cid;
  std::string name;
  char scenario = 'a';
  Way way = Way::Plumb;
  int host_port = 0;
  unsigned slot = 0;                     // floor addressing
  std::string plumb_result;              // plumb's ADD stdout (prevResult of its DEL)
  std::vector<std::string> ref_results;  // reference: the final result of each attachment
  std::map<std::string, std::vector<IpAddr>> expect;  // pod interface -> its addresses
};

// The networks. Addresses are IPv6 documentation addresses only: the IPv4 documentation /24s
// cannot hold 1000 pods per network. The floor uses ::1:0 + slot, outside host-local's range.
constexpr const char* kSubnet[4] = {"", "2001:db8:0:1::/64", "2001:db8:0:2::/64", "2001:db8:0:3::/64"};

std::string ipam_json(const std::string& data_dir, int net) {
  const std::string p = std::string("2001:db8:0:") + std::to_string(net) + "::";
  return R"({"type": "host-local", "dataDir": ")" + data_dir + R"(", "ranges": [[{"subnet": ")" + kSubnet[net] +
         R"(", "rangeStart": ")" + p + R"(2", "rangeEnd": ")" + p + R"(ffff")" +
         (net == 1 ? R"(, "gateway": ")" + p + R"(1")" : std::string()) + "}]]}";
}

/// The default network's conflist for a scenario: bridge + host-local; in c also portmap and
/// bandwidth (capabilities portMappings and bandwidth).
std::string default_conflist(const std::string& data_dir, char scenario) {
  std::string s = R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "ipMasq": true,
   "ipam": )" + ipam_json(data_dir, 1) + "}";
  if (scenario == 'c') {
    s += R"(,
  {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
  {"type": "bandwidth", "capabilities": {"bandwidth": true}})";
  }
  return s + "]}\n";
}

std::string sec_bridge_json(const std::string& data_dir) {
  return R"({"cniVersion": "1.0.0", "name": "sec-bridge", "type": "bridge", "bridge": "br1", "ipam": )" +
         ipam_json(data_dir, 2) + "}";
}

std::string sec_macvlan_json(const std::string& data_dir) {
  return R"({"cniVersion": "1.0.0", "name": "sec-macvlan", "type": "macvlan", "master": "mst0", "mode": "bridge", "ipam": )" +
         ipam_json(data_dir, 3) + "}";
}

/// The runtime's runtimeConfig for a pod of scenario c (what containerd derives from the pod
/// spec): one host port and a bandwidth limit of 100 Mbit/s each way.
std::string runtime_config(const Pod& p) {
  return R"({"portMappings": [{"hostPort": )" + std::to_string(p.host_port) +
         R"(, "containerPort": 80, "protocol": "tcp"}], "bandwidth": {"ingressRate": 100000000, "ingressBurst": 1000000, "egressRate": 100000000, "egressBurst": 1000000}})";
}

// ---------------------------------------------------------------------------------------------
// The bench

struct NodeNs {
  std::string name;
  std::string dir;  // scratch: store, state, IPAM data of this node
  std::optional<plumb::netns::Netns> ns;
};

class Bench {
 public:
  Bench(Options o, std::string scratch) : o_(std::move(o)), scratch_(std::move(scratch)) {}

  void setup();
  void preflight();
  void phase_latency();
  void phase_throughput();
  void phase_fill();
  void report();

 private:
  // One pod: make its sandbox, ADD (timed), verify, DEL (timed), verify, remove the sandbox.
  Sample one_sample(const std::string& phase, char scenario, Way w, int fill, int iter, bool warmup);
  Pod new_pod(char scenario, Way w, const std::string& tag);
  void make_sandbox(Pod& p);
  void drop_sandbox(Pod& p);
  Cost add(Pod& p);
  Cost del(Pod& p);
  Cost add_plumb(Pod& p);
  Cost del_plumb(Pod& p);
  Cost add_reference(Pod& p);
  Cost del_reference(Pod& p);
  Cost add_floor(Pod& p);
  Cost del_floor(Pod& p);
  void verify_added(const Pod& p);
  void verify_deleted(const Pod& p);
  NodeNs& node_of(Way w) { return w == Way::Reference ? ref_ : plumb_; }
  std::vector<std::string> cni_env(const std::string& verb, const Pod& p, const std::string& ifname) const;
  std::string plumb_config(const Pod& p, const std::string& prev_result) const;
  /// Runs fn(i) for i in [0, n) on `workers` threads, each inside `node`; returns wall time.
  int64_t parallel(int n, int workers, NodeNs& node, const std::function<void(int)>& fn);
  std::vector<Way> order(int iter) const;

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
  struct Tput {
    Way way;
    int workers;
    int pods;
    int64_t wall_ns;
    std::vector<int64_t> add_ns;
  };
  std::vector<Tput> tput_;
  std::map<Way, int> filled_;
  std::string started_utc_, load_start_;
  std::map<std::string, double> phase_secs_;
};

std::vector<Way> Bench::order(int iter) const {
  std::vector<Way> w(std::begin(kWays), std::end(kWays));
  std::rotate(w.begin(), w.begin() + (iter % 3), w.end());
  return w;
}

std::vector<std::string> Bench::cni_env(const std::string& verb, const Pod& p, const std::string& ifname) const {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "CNI_COMMAND=" + verb,
          "CNI_CONTAINERID=" + p.cid,
          "CNI_NETNS=/run/netns/" + p.netns,
          "CNI_IFNAME=" + ifname,
          "CNI_PATH=" + o_.cni_path,
          "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + p.name +
              ";K8S_POD_INFRA_CONTAINER_ID=" + p.cid};
}

void Bench::setup() {
  started_utc_ = [] {
    time_t t = time(nullptr);
    char buf[64];
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    return std::string(buf);
  }();
  load_start_ = read_text("/proc/loadavg");
  for (const std::string& bin : {o_.plumb, o_.floor}) {
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
  auto nad = [](const std::string& name, const std::string& config) {
    return "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name +
           "\n  namespace: default\nspec:\n  config: '" + config + "'\n";
  };
  write_text(plumb_.dir + "/store/nads/networks.yaml",
             nad("sec-bridge", sec_bridge_json(ipam_p)) + "---\n" + nad("sec-macvlan", sec_macvlan_json(ipam_p)));
  fs::create_directories(plumb_.dir + "/store/pods/default");
  fs::create_directories(plumb_.dir + "/state");
  fs::create_directories(plumb_.dir + "/net.d");
}

std::string Bench::plumb_config(const Pod& p, const std::string& prev_result) const {
  const char s = p.scenario == 'b' ? 'a' : p.scenario;  // b's default network is a's
  std::string c = R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "clusterNetwork": ")" + plumb_.dir + "/default-" +
                  s + R"(.conflist", "storeDir": ")" + plumb_.dir + R"(/store", "stateDir": ")" + plumb_.dir +
                  R"(/state", "confDir": ")" + plumb_.dir + R"(/net.d", "bpffsDir": ")" + bpffs_ +
                  R"(", "capabilities": {"portMappings": true, "bandwidth": true})";
  if (p.scenario == 'c') c += R"(, "runtimeConfig": )" + runtime_config(p);
  if (!prev_result.empty()) c += R"(, "prevResult": )" + prev_result;
  return c + "}";
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
    if (p.scenario != 'a') {
      yaml += "  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\": \"sec-bridge\", \"interface\": \"net1\"}, "
              "{\"name\": \"sec-macvlan\", \"interface\": \"net2\"}]'\n";
    }
    write_text(plumb_.dir + "/store/pods/default/" + p.name + ".yaml", yaml);
  }
}

void Bench::drop_sandbox(Pod& p) {
  delete_netns(p.netns);
  if (p.way == Way::Plumb) ::unlink((plumb_.dir + "/store/pods/default/" + p.name + ".yaml").c_str());
}

Cost Bench::add(Pod& p) {
  switch (p.way) {
    case Way::Plumb: return add_plumb(p);
    case Way::Reference: return add_reference(p);
    case Way::Floor: return add_floor(p);
  }
  return {};
}

Cost Bench::del(Pod& p) {
  switch (p.way) {
    case Way::Plumb: return del_plumb(p);
    case Way::Reference: return del_reference(p);
    case Way::Floor: return del_floor(p);
  }
  return {};
}

/// Reads "ips" of a CNI 1.0.0 result into expect: each address on its sandbox interface.
void expect_from_result(const rapidjson::Value& r, std::map<std::string, std::vector<IpAddr>>& expect, const std::string& what) {
  if (!r.IsObject() || !r.HasMember("ips") || !r["ips"].IsArray() || !r.HasMember("interfaces") || !r["interfaces"].IsArray()) {
    throw std::runtime_error(what + ": result has no ips/interfaces: " + json_dump(r));
  }
  const auto& ifs = r["interfaces"];
  for (const auto& ip : r["ips"].GetArray()) {
    if (!ip.HasMember("interface") || !ip["interface"].IsInt() || !ip.HasMember("address")) {
      throw std::runtime_error(what + ": result ip without interface/address: " + json_dump(ip));
    }
    const int idx = ip["interface"].GetInt();
    if (idx < 0 || static_cast<rapidjson::SizeType>(idx) >= ifs.Size() || !ifs[idx].HasMember("sandbox")) {
      throw std::runtime_error(what + ": result ip points at no sandbox interface: " + json_dump(r));
    }
    auto prefix = must(plumb::IpPrefix::parse(ip["address"].GetString()), what + ": result address");
    expect[ifs[idx]["name"].GetString()].push_back(prefix.addr);
  }
}

Cost Bench::add_plumb(Pod& p) {
  Cost c;
  Proc r = spawn({o_.plumb}, cni_env("ADD", p, "eth0"), plumb_config(p, ""));
  c.add(r);
  if (!r.ok()) throw std::runtime_error("plumb ADD of " + p.cid + " (scenario " + p.scenario + ") failed: " + r.describe());
  p.plumb_result = r.out;
  // What to verify: every attachment's addresses from the network-status plumb wrote.
  const std::string status = read_text(plumb_.dir + "/store/status/default/" + p.name + ".json");
  rapidjson::Document d;
  d.Parse(status.c_str());
  if (d.HasParseError() || !d.IsArray()) throw std::runtime_error("plumb wrote no valid network-status for " + p.name + ": " + status);
  for (const auto& e : d.GetArray()) {
    if (!e.HasMember("interface") || !e.HasMember("ips")) continue;
    for (const auto& ip : e["ips"].GetArray()) {
      p.expect[e["interface"].GetString()].push_back(must(IpAddr::parse(ip.GetString()), "network-status ip"));
    }
  }
  rapidjson::Document res;
  res.Parse(r.out.c_str());
  if (res.HasParseError()) throw std::runtime_error("plumb ADD printed no JSON result: " + r.out);
  std::map<std::string, std::vector<IpAddr>> from_result;
  expect_from_result(res, from_result, "plumb ADD");
  if (from_result["eth0"] != p.expect["eth0"]) throw std::runtime_error("plumb's result and network-status disagree on eth0's addresses");
  return c;
}

Cost Bench::del_plumb(Pod& p) {
  Cost c;
  Proc r = spawn({o_.plumb}, cni_env("DEL", p, "eth0"), plumb_config(p, p.plumb_result));
  c.add(r);
  if (!r.ok()) throw std::runtime_error("plumb DEL of " + p.cid + " failed: " + r.describe());
  return c;
}

/// One attachment of the reference way: its network (a conflist) and interface.
struct RefAttachment {
  std::string ifname;
  std::string conflist;  // {"cniVersion","name","plugins":[...]} or a single plugin config
};

std::vector<RefAttachment> ref_attachments(const std::string& ipam_dir, char scenario) {
  std::vector<RefAttachment> a;
  a.push_back({"eth0", default_conflist(ipam_dir, scenario == 'b' ? 'a' : scenario)});
  if (scenario != 'a') {
    a.push_back({"net1", sec_bridge_json(ipam_dir)});
    a.push_back({"net2", sec_macvlan_json(ipam_dir)});
  }
  return a;
}

/// A network of the reference way as libcni sees it: a conflist, or a single plugin config
/// (a list of one).
class RefNet {
 public:
  explicit RefNet(const std::string& network) {
    net_.Parse(network.c_str());
    if (net_.HasParseError()) throw std::runtime_error("bench network config is not JSON: " + network);
    if (net_.HasMember("plugins")) {
      for (const auto& p : net_["plugins"].GetArray()) plugins_.push_back(&p);
    } else {
      plugins_.push_back(&net_);
    }
  }
  size_t size() const { return plugins_.size(); }
  std::string type(size_t i) const { return (*plugins_[i])["type"].GetString(); }

  /// The config plugin i is executed with: cniVersion and name of the list injected, the
  /// runtime's runtimeConfig keys this plugin declares in "capabilities", prevResult if any.
  std::string config(size_t i, const rapidjson::Value& runtime, const std::string& prev_result) const {
    rapidjson::Document c;
    auto& a = c.GetAllocator();
    c.CopyFrom(*plugins_[i], a);
    c.RemoveMember("cniVersion");
    c.RemoveMember("name");
    c.AddMember("cniVersion", rapidjson::Value(net_["cniVersion"], a), a);
    c.AddMember("name", rapidjson::Value(net_["name"], a), a);
    if (c.HasMember("capabilities") && runtime.IsObject()) {
      rapidjson::Value rc(rapidjson::kObjectType);
      for (auto it = c["capabilities"].MemberBegin(); it != c["capabilities"].MemberEnd(); ++it) {
        if (!it->value.IsBool() || !it->value.GetBool()) continue;
        auto rv = runtime.FindMember(it->name.GetString());
        if (rv != runtime.MemberEnd()) rc.AddMember(rapidjson::Value(it->name, a), rapidjson::Value(rv->value, a), a);
      }
      if (rc.MemberCount() > 0) c.AddMember("runtimeConfig", rc, a);
    }
    if (!prev_result.empty()) {
      rapidjson::Document prev;
      prev.Parse(prev_result.c_str());
      if (prev.HasParseError()) throw std::runtime_error("prevResult is not JSON: " + prev_result);
      c.AddMember("prevResult", rapidjson::Value(prev, a), a);
    }
    return json_dump(c);
  }

 private:
  rapidjson::Document net_;
  std::vector<const rapidjson::Value*> plugins_;
};

Cost Bench::add_reference(Pod& p) {
  Cost c;
  int64_t t0 = now_ns();
  rapidjson::Document runtime;
  runtime.Parse(p.scenario == 'c' ? runtime_config(p).c_str() : "{}");
  c.ns += now_ns() - t0;  // the delegating runtime's own work is part of the way's time
  for (const auto& att : ref_attachments(ref_.dir + "/ipam", p.scenario)) {
    // ADD runs the list in order, each plugin getting the previous one's result.
    t0 = now_ns();
    RefNet net(att.conflist);
    c.ns += now_ns() - t0;
    std::string prev;
    for (size_t i = 0; i < net.size(); ++i) {
      t0 = now_ns();
      const std::string conf = net.config(i, runtime, prev);
      c.ns += now_ns() - t0;
      Proc r = spawn({o_.cni_path + "/" + net.type(i)}, cni_env("ADD", p, att.ifname), conf);
      c.add(r);
      if (!r.ok()) {
        throw std::runtime_error("reference " + net.type(i) + " ADD of " + p.cid + " (" + att.ifname + ", scenario " +
                                 p.scenario + ") failed: " + r.describe());
      }
      prev = r.out;
    }
    rapidjson::Document res;
    res.Parse(prev.c_str());
    if (res.HasParseError()) throw std::runtime_error("reference chain printed no JSON result: " + prev);
    expect_from_result(res, p.expect, "reference ADD " + att.ifname);
    p.ref_results.push_back(prev);
  }
  return c;
}

Cost Bench::del_reference(Pod& p) {
  Cost c;
  int64_t t0 = now_ns();
  rapidjson::Document runtime;
  runtime.Parse(p.scenario == 'c' ? runtime_config(p).c_str() : "{}");
  auto atts = ref_attachments(ref_.dir + "/ipam", p.scenario);
  c.ns += now_ns() - t0;
  // Multus deletes the attachments in reverse order; libcni runs each list in reverse order,
  // every plugin with the attachment's cached result as prevResult.
  for (size_t k = atts.size(); k-- > 0;) {
    t0 = now_ns();
    RefNet net(atts[k].conflist);
    c.ns += now_ns() - t0;
    for (size_t i = net.size(); i-- > 0;) {
      t0 = now_ns();
      const std::string conf = net.config(i, runtime, p.ref_results.at(k));
      c.ns += now_ns() - t0;
      Proc r = spawn({o_.cni_path + "/" + net.type(i)}, cni_env("DEL", p, atts[k].ifname), conf);
      c.add(r);
      if (!r.ok()) throw std::runtime_error("reference " + net.type(i) + " DEL of " + p.cid + " failed: " + r.describe());
    }
  }
  return c;
}

std::vector<std::string> floor_argv(const Options& o, const std::string& verb, const Pod& p, const std::string& bpffs) {
  return {o.floor, verb, std::string(1, p.scenario), "/run/netns/" + p.netns, std::to_string(p.slot), std::to_string(p.host_port), bpffs};
}

Cost Bench::add_floor(Pod& p) {
  Cost c;
  Proc r = spawn(floor_argv(o_, "ADD", p, bpffs_), {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "");
  c.add(r);
  if (!r.ok()) throw std::runtime_error("floor ADD (scenario " + std::string(1, p.scenario) + ") failed: " + r.describe());
  for (int net = 1; net <= (p.scenario == 'a' ? 1 : 3); ++net) {
    IpAddr a = must(plumb::IpPrefix::parse(kSubnet[net]), "subnet").addr.plus(0x10000 + p.slot);
    p.expect[net == 1 ? "eth0" : net == 2 ? "net1" : "net2"].push_back(a);
  }
  return c;
}

Cost Bench::del_floor(Pod& p) {
  Cost c;
  Proc r = spawn(floor_argv(o_, "DEL", p, bpffs_), {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "");
  c.add(r);
  if (!r.ok()) throw std::runtime_error("floor DEL failed: " + r.describe());
  return c;
}

/// Every expected interface exists in the pod, is up and holds each of its addresses; the
/// scenario's interfaces are all there.
void Bench::verify_added(const Pod& p) {
  auto ns = must(plumb::netns::Netns::open("/run/netns/" + p.netns), "open pod netns");
  auto nl = must(plumb::netlink::Socket::open_in(ns.fd()), "open rtnetlink in pod");
  auto links = must(plumb::link::list(nl), "list pod links");
  auto addrs = must(plumb::addr::list(nl), "list pod addresses");
  const std::string who = std::string(way_name(p.way)) + " ADD of " + p.cid + " (scenario " + p.scenario + ")";
  std::vector<std::string> want = {"eth0"};
  if (p.scenario != 'a') want = {"eth0", "net1", "net2"};
  for (auto& w : want) {
    if (p.expect.count(w) == 0 || p.expect.at(w).empty()) throw std::runtime_error(who + ": no address reported for " + w);
  }
  for (auto& [ifname, ips] : p.expect) {
    auto l = std::find_if(links.begin(), links.end(), [&](const plumb::link::LinkInfo& li) { return li.name == ifname; });
    if (l == links.end()) throw std::runtime_error(who + ": interface " + ifname + " is not in the pod");
    if (!(l->flags & IFF_UP)) throw std::runtime_error(who + ": interface " + ifname + " is down");
    for (auto& ip : ips) {
      bool found = std::any_of(addrs.begin(), addrs.end(),
                               [&](const plumb::addr::AddrInfo& a) { return a.index == l->index && a.prefix.addr == ip; });
      if (!found) throw std::runtime_error(who + ": interface " + ifname + " lacks address " + ip.str());
    }
  }
}

void Bench::verify_deleted(const Pod& p) {
  auto ns = must(plumb::netns::Netns::open("/run/netns/" + p.netns), "open pod netns");
  auto nl = must(plumb::netlink::Socket::open_in(ns.fd()), "open rtnetlink in pod");
  for (auto& l : must(plumb::link::list(nl), "list pod links")) {
    if (l.name != "lo") throw std::runtime_error(std::string(way_name(p.way)) + " DEL of " + p.cid + " left interface " + l.name + " in the pod");
  }
}

Sample Bench::one_sample(const std::string& phase, char scenario, Way w, int fill, int iter, bool warmup) {
  Pod p = new_pod(scenario, w, phase);
  make_sandbox(p);
  Sample s{phase, scenario, w, fill, iter, warmup, {}, {}};
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

// ---------------------------------------------------------------------------------------------
// Phases

void Bench::preflight() {
  // One pod per scenario and way, plumb first: its first pods create what the floor takes as
  // given (bridges, gateway address, nftables table, pinned programs). Any failure is reported
  // per scenario; nothing is silently skipped.
  std::vector<std::string> problems;
  for (char s : o_.scenarios) {
    for (Way w : kWays) {
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
      for (Way w : order(it + static_cast<int>(si))) {
        progress_.set("latency: iteration " + std::to_string(it + 1) + "/" + std::to_string(iters) + " (" +
                      std::to_string(o_.warmup) + " warm-up), scenario " + s + ", " + way_name(w));
        Sample smp = one_sample("latency", s, w, 0, it - o_.warmup, it < o_.warmup);
        std::lock_guard<std::mutex> l(mu_);
        samples_.push_back(smp);
      }
    }
  }
  phase_secs_["latency"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("latency: done in " + fmt(0, phase_secs_["latency"]) + " s");
}

void Bench::phase_throughput() {
  const int64_t t0 = now_ns();
  const char s = o_.tput_scenario;
  int round = 0;
  for (int workers : o_.workers) {
    for (Way w : order(round++)) {
      progress_.set("throughput: " + std::string(way_name(w)) + ", " + std::to_string(workers) + " workers, " +
                    std::to_string(o_.tput_pods) + " pods of scenario " + s, true);
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
      tput_.push_back({w, workers, o_.tput_pods, wall, lat});
    }
  }
  phase_secs_["throughput"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("throughput: done in " + fmt(0, phase_secs_["throughput"]) + " s");
}

void Bench::phase_fill() {
  const int64_t t0 = now_ns();
  const char s = o_.fill_scenario;
  std::map<Way, std::vector<Pod>> fill;  // the pods that stay on each node
  int current = 0;
  for (size_t li = 0; li < o_.fill_levels.size(); ++li) {
    const int level = o_.fill_levels[li];
    // Both nodes fill at once (the floor shares plumb's node and its pods); untimed.
    std::vector<std::thread> fillers;
    std::mutex emu;
    std::string error;
    for (Way w : {Way::Plumb, Way::Reference}) {
      auto& pods = fill[w];
      const size_t before = pods.size();
      for (int i = current; i < level; ++i) {
        pods.push_back(new_pod(s, w, "resident"));
        make_sandbox(pods.back());
      }
      std::vector<Pod>* vec = &pods;  // map nodes are stable: no insertion while the fillers run
      fillers.emplace_back([&, w, vec, before, level] {
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
    current = level;
    for (int it = 0; it < o_.fill_samples; ++it) {
      for (Way w : order(it)) {
        progress_.set("fill: " + std::to_string(level) + " pods on the node, sample " + std::to_string(it + 1) + "/" +
                      std::to_string(o_.fill_samples) + ", " + way_name(w));
        Sample smp = one_sample("fill", s, w, level, it, false);
        std::lock_guard<std::mutex> l(mu_);
        samples_.push_back(smp);
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

// ---------------------------------------------------------------------------------------------
// Statistics and output

double pct(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];  // nearest rank
}

struct Dist {
  double p50 = NAN, p90 = NAN, p99 = NAN, mean = NAN, min = NAN, max = NAN;
  size_t n = 0;
};
Dist dist(const std::vector<double>& v) {
  Dist d;
  d.n = v.size();
  if (v.empty()) return d;
  d.p50 = pct(v, 0.5);
  d.p90 = pct(v, 0.9);
  d.p99 = pct(v, 0.99);
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.min = *std::min_element(v.begin(), v.end());
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

std::string ms(double v) {
  if (std::isnan(v)) return "-";
  return fmt(v < 10 ? 2 : v < 100 ? 1 : 0, v);
}
std::string ratio(double v) { return std::isnan(v) ? "-" : fmt(v < 10 ? 2 : 1, v) + "×"; }

std::string machine_text() {
  std::string model;
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  long mem_kib = 0;
  std::ifstream m("/proc/meminfo");
  for (std::string line; std::getline(m, line);) {
    if (line.rfind("MemTotal:", 0) == 0) mem_kib = std::stol(line.substr(9));
  }
  utsname u{};
  uname(&u);
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, " +
         std::to_string(mem_kib / 1024 / 1024) + " GiB, Linux " + u.release;
}

void Bench::report() {
  namespace rj = rapidjson;
  const std::string load_end = read_text("/proc/loadavg");
  auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  auto sel = [&](const std::string& phase, char s, Way w, int fill) {
    std::vector<const Sample*> v;
    for (auto& x : samples_) {
      if (x.phase == phase && x.scenario == s && x.way == w && x.fill == fill && !x.warmup) v.push_back(&x);
    }
    return v;
  };
  auto vals = [](const std::vector<const Sample*>& v, bool add, int what) {
    std::vector<double> out;
    for (auto* s : v) {
      const Cost& c = add ? s->add : s->del;
      out.push_back(what == 0 ? static_cast<double>(c.ns) / 1e6 : what == 1 ? static_cast<double>(c.rss_kib) / 1024.0
                                                                       : static_cast<double>(c.cpu_us) / 1e3);
    }
    return out;
  };
  // Ratios pair by pair: samples of the same iteration (and scenario, fill level).
  auto pair_ratios = [&](const std::string& phase, char s, int fill, Way num, Way den, bool add) {
    std::map<int, double> a, b;
    for (auto* x : sel(phase, s, num, fill)) a[x->iter] = static_cast<double>((add ? x->add : x->del).ns);
    for (auto* x : sel(phase, s, den, fill)) b[x->iter] = static_cast<double>((add ? x->add : x->del).ns);
    std::vector<double> r;
    for (auto& [it, v] : a) {
      if (b.count(it) && b[it] > 0) r.push_back(v / b[it]);
    }
    return r;
  };

  rj::Document doc(rj::kObjectType);
  auto& al = doc.GetAllocator();
  auto str = [&](const std::string& s) { return rj::Value(s.c_str(), al); };
  auto dist_json = [&](const Dist& d) {
    rj::Value o(rj::kObjectType);
    auto num = [&](double v) { return std::isnan(v) ? rj::Value() : rj::Value(v); };
    o.AddMember("p50", num(d.p50), al);
    o.AddMember("p90", num(d.p90), al);
    o.AddMember("p99", num(d.p99), al);
    o.AddMember("mean", num(d.mean), al);
    o.AddMember("min", num(d.min), al);
    o.AddMember("max", num(d.max), al);
    o.AddMember("n", static_cast<uint64_t>(d.n), al);
    return o;
  };
  rj::Value machine(rj::kObjectType);
  machine.AddMember("description", str(machine_text()), al);
  machine.AddMember("loadavg_start", str(trim(load_start_)), al);
  machine.AddMember("loadavg_end", str(trim(load_end)), al);
  doc.AddMember("date", str(started_utc_), al);
  doc.AddMember("machine", machine, al);
  rj::Value settings(rj::kObjectType);
  settings.AddMember("quick", o_.quick, al);
  settings.AddMember("samples", o_.samples, al);
  settings.AddMember("warmup", o_.warmup, al);
  settings.AddMember("scenarios", str(o_.scenarios), al);
  rj::Value levels(rj::kArrayType);
  for (int l : o_.fill_levels) levels.PushBack(l, al);
  settings.AddMember("fill_levels", levels, al);
  settings.AddMember("fill_samples", o_.fill_samples, al);
  settings.AddMember("fill_scenario", str(std::string(1, o_.fill_scenario)), al);
  settings.AddMember("throughput_pods", o_.tput_pods, al);
  settings.AddMember("plumb", str(o_.plumb), al);
  settings.AddMember("cni_path", str(o_.cni_path), al);
  doc.AddMember("settings", settings, al);
  rj::Value phases(rj::kObjectType);
  for (auto& [k, v] : phase_secs_) phases.AddMember(str(k), rj::Value(v), al);
  doc.AddMember("phase_seconds", phases, al);

  rj::Value all(rj::kArrayType);
  for (auto& s : samples_) {
    rj::Value o(rj::kObjectType);
    o.AddMember("phase", str(s.phase), al);
    o.AddMember("scenario", str(std::string(1, s.scenario)), al);
    o.AddMember("way", str(way_name(s.way)), al);
    o.AddMember("pods_on_node", s.fill, al);
    o.AddMember("iteration", s.iter, al);
    o.AddMember("warmup", s.warmup, al);
    for (auto [key, c] : {std::pair<const char*, const Cost*>{"add", &s.add}, {"del", &s.del}}) {
      rj::Value co(rj::kObjectType);
      co.AddMember("ms", static_cast<double>(c->ns) / 1e6, al);
      co.AddMember("peak_rss_kib", static_cast<int64_t>(c->rss_kib), al);
      co.AddMember("cpu_ms", static_cast<double>(c->cpu_us) / 1e3, al);
      co.AddMember("processes", c->procs, al);
      o.AddMember(rj::StringRef(key), co, al);
    }
    all.PushBack(o, al);
  }

  std::ostringstream md;
  md << "# plumb pod set-up latency bench\n\n"
     << "Run " << started_utc_ << " on " << machine_text() << ". Load average at start " << trim(load_start_)
     << ", at end " << trim(load_end) << (o_.quick ? ". **--quick run: few samples.**" : ".") << "\n"
     << "Milliseconds of wall time per CNI invocation (posix_spawn to wait4), warm-up discarded; ratios are medians of "
        "per-pair ratios (the samples of one iteration). IPv6 pods, DAD off in pod namespaces.\n\n";

  // Latency table.
  rj::Value lat(rj::kArrayType);
  md << "## Latency (pods on the node: 0)\n\n"
     << "| scenario | way | ADD p50 | ADD p90 | ADD p99 | DEL p50 | DEL p90 | DEL p99 | peak RSS MiB (ADD, max) | CPU ms (ADD p50) | plugin execs per ADD |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (char s : o_.scenarios) {
    for (Way w : kWays) {
      auto v = sel("latency", s, w, 0);
      Dist a = dist(vals(v, true, 0)), d = dist(vals(v, false, 0)), rss = dist(vals(v, true, 1)), cpu = dist(vals(v, true, 2));
      md << "| " << s << " | " << way_name(w) << " | " << ms(a.p50) << " | " << ms(a.p90) << " | " << ms(a.p99) << " | "
         << ms(d.p50) << " | " << ms(d.p90) << " | " << ms(d.p99) << " | " << fmt(1, rss.max) << " | " << ms(cpu.p50)
         << " | " << (v.empty() ? 0 : v.front()->add.procs) << " |\n";
      rj::Value o(rj::kObjectType);
      o.AddMember("scenario", str(std::string(1, s)), al);
      o.AddMember("way", str(way_name(w)), al);
      o.AddMember("add_ms", dist_json(a), al);
      o.AddMember("del_ms", dist_json(d), al);
      o.AddMember("add_peak_rss_mib", dist_json(rss), al);
      o.AddMember("del_peak_rss_mib", dist_json(dist(vals(v, false, 1))), al);
      o.AddMember("add_cpu_ms", dist_json(cpu), al);
      lat.PushBack(o, al);
    }
  }

  // Ratios and goals.
  rj::Value ratios(rj::kArrayType);
  md << "\n## Ratios (median of pair-by-pair ratios, [p10, p90])\n\n"
     << "| scenario | ADD reference/plumb | DEL reference/plumb | ADD plumb/floor | DEL plumb/floor |\n|---|---|---|---|---|\n";
  std::map<char, std::array<double, 4>> med;
  for (char s : o_.scenarios) {
    md << "| " << s;
    rj::Value o(rj::kObjectType);
    o.AddMember("scenario", str(std::string(1, s)), al);
    int k = 0;
    for (auto [num, den, add, key] : {std::tuple{Way::Reference, Way::Plumb, true, "add_reference_over_plumb"},
                                      std::tuple{Way::Reference, Way::Plumb, false, "del_reference_over_plumb"},
                                      std::tuple{Way::Plumb, Way::Floor, true, "add_plumb_over_floor"},
                                      std::tuple{Way::Plumb, Way::Floor, false, "del_plumb_over_floor"}}) {
      auto r = pair_ratios("latency", s, 0, num, den, add);
      Dist d = dist(r);
      med[s][k++] = d.p50;
      md << " | " << ratio(d.p50) << " [" << ratio(pct(r, 0.1)) << ", " << ratio(pct(r, 0.9)) << "]";
      rj::Value ro = dist_json(d);
      ro.AddMember("p10", std::isnan(pct(r, 0.1)) ? rj::Value() : rj::Value(pct(r, 0.1)), al);
      o.AddMember(rj::StringRef(key), ro, al);
    }
    md << " |\n";
    ratios.PushBack(o, al);
  }

  // Fill sweep.
  rj::Value fillj(rj::kArrayType);
  std::map<Way, std::map<int, double>> fill_p50;
  md << "\n## p50 ADD as the node fills (scenario " << o_.fill_scenario << ", " << o_.fill_samples
     << " samples per level; fill pods of the same shape, made by plumb on plumb's node and by the reference chain on "
        "the reference node)\n\n| pods on the node |";
  for (Way w : kWays) md << " " << way_name(w) << " ADD p50 | " << way_name(w) << " DEL p50 |";
  md << " reference/plumb ADD |\n|---|";
  for (size_t i = 0; i < 7; ++i) md << "---|";
  md << "\n";
  for (int level : o_.fill_levels) {
    md << "| " << level << " |";
    rj::Value o(rj::kObjectType);
    o.AddMember("pods_on_node", level, al);
    for (Way w : kWays) {
      auto v = sel("fill", o_.fill_scenario, w, level);
      Dist a = dist(vals(v, true, 0)), d = dist(vals(v, false, 0));
      fill_p50[w][level] = a.p50;
      md << " " << ms(a.p50) << " | " << ms(d.p50) << " |";
      rj::Value wo(rj::kObjectType);
      wo.AddMember("add_ms", dist_json(a), al);
      wo.AddMember("del_ms", dist_json(d), al);
      o.AddMember(str(way_name(w)), wo, al);
    }
    md << " " << ratio(dist(pair_ratios("fill", o_.fill_scenario, level, Way::Reference, Way::Plumb, true)).p50) << " |\n";
    fillj.PushBack(o, al);
  }
  const int lo = o_.fill_levels.front(), hi = o_.fill_levels.back();
  md << "\nGrowth of p50 ADD from " << lo << " to " << hi << " pods:";
  for (Way w : kWays) md << " " << way_name(w) << " " << ratio(fill_p50[w][hi] / fill_p50[w][lo]) << ";";
  md << "\n";

  // Throughput.
  rj::Value tputj(rj::kArrayType);
  md << "\n## ADD throughput (scenario " << o_.tput_scenario << ", " << o_.tput_pods
     << " pods per run, pods/s = pods / wall time of the run)\n\n| workers |";
  for (Way w : kWays) md << " " << way_name(w) << " pods/s | " << way_name(w) << " ADD p50 |";
  md << "\n|---|---|---|---|---|---|---|\n";
  for (int workers : o_.workers) {
    md << "| " << workers << " |";
    for (Way w : kWays) {
      for (auto& t : tput_) {
        if (t.way != w || t.workers != workers) continue;
        std::vector<double> l;
        for (auto x : t.add_ns) l.push_back(static_cast<double>(x) / 1e6);
        const double pps = static_cast<double>(t.pods) / (static_cast<double>(t.wall_ns) / 1e9);
        md << " " << fmt(1, pps) << " | " << ms(dist(l).p50) << " |";
        rj::Value o(rj::kObjectType);
        o.AddMember("way", str(way_name(w)), al);
        o.AddMember("workers", workers, al);
        o.AddMember("pods", t.pods, al);
        o.AddMember("wall_s", static_cast<double>(t.wall_ns) / 1e9, al);
        o.AddMember("pods_per_s", pps, al);
        o.AddMember("add_ms", dist_json(dist(l)), al);
        tputj.PushBack(o, al);
      }
    }
    md << "\n";
  }

  // Goals (issue 8), scenario c.
  md << "\n## Goals (issue 8)\n\n";
  auto goal = [&](const std::string& what, double v, bool met) {
    md << "- " << what << ": " << (std::isnan(v) ? std::string("not measured") : ratio(v)) << " — "
       << (std::isnan(v) ? "n/a" : met ? "**met**" : "**not met**") << "\n";
  };
  if (med.count('c')) {
    goal("scenario c ADD ≥ 25× faster than the reference chain", med['c'][0], med['c'][0] >= 25);
    goal("scenario c ADD ≤ 1.5× the kernel floor", med['c'][2], med['c'][2] <= 1.5);
    goal("scenario c DEL ≥ 50× faster than the reference chain", med['c'][1], med['c'][1] >= 50);
  } else {
    md << "- scenario c was not run (--scenarios)\n";
  }
  const double growth = fill_p50[Way::Plumb][hi] / fill_p50[Way::Plumb][lo];
  goal("plumb p50 ADD flat (≤ 1.2×) from " + std::to_string(lo) + " to " + std::to_string(hi) + " pods (scenario " +
           std::string(1, o_.fill_scenario) + ")",
       growth, growth <= 1.2);
  md << "\nPhases: ";
  for (auto& [k, v] : phase_secs_) md << k << " " << fmt(0, v) << " s; ";
  md << "total " << fmt(0, static_cast<double>(progress_.elapsed_ns()) / 1e9) << " s.\n";

  rj::Value summary(rj::kObjectType);
  summary.AddMember("latency", lat, al);
  summary.AddMember("ratios", ratios, al);
  summary.AddMember("fill", fillj, al);
  summary.AddMember("throughput", tputj, al);
  doc.AddMember("summary", summary, al);
  doc.AddMember("samples", all, al);

  fs::create_directories(o_.out_dir);
  rj::StringBuffer sb;
  rj::PrettyWriter<rj::StringBuffer> writer(sb);
  writer.SetMaxDecimalPlaces(4);
  doc.Accept(writer);
  write_text(o_.out_dir + "/results.json", std::string(sb.GetString()) + "\n");
  write_text(o_.out_dir + "/results.md", md.str());

  // The plot: p50 ADD against pods on the node, one line per way (log scale: the ways differ by
  // orders of magnitude).
  std::ostringstream dat;
  dat << "# pods_on_node plumb_p50_ms reference_p50_ms floor_p50_ms\n";
  for (int level : o_.fill_levels) {
    dat << level;
    for (Way w : kWays) dat << " " << fmt(4, fill_p50[w][level]);
    dat << "\n";
  }
  write_text(o_.out_dir + "/latency_vs_pods.dat", dat.str());
  std::string gp = "set terminal pngcairo size 960,600 font 'sans,11'\n"
                   "set output '" + o_.out_dir + "/latency_vs_pods.png'\n"
                   "set title 'Pod ADD latency (scenario " + std::string(1, o_.fill_scenario) + ", p50) as the node fills — " +
                   started_utc_ + "'\n"
                   "set xlabel 'pods already on the node'\nset ylabel 'p50 ADD latency (ms, log scale)'\n"
                   "set logscale y\nset grid\nset key top left\nset xtics (" ;
  for (size_t i = 0; i < o_.fill_levels.size(); ++i) gp += (i ? "," : "") + std::to_string(o_.fill_levels[i]);
  gp += ")\nplot '" + o_.out_dir + "/latency_vs_pods.dat' using 1:3 with linespoints lw 2 title 'reference chain', \\\n"
        "     '' using 1:2 with linespoints lw 2 title 'plumb', \\\n"
        "     '' using 1:4 with linespoints lw 2 title 'kernel floor'\n";
  write_text(o_.out_dir + "/latency_vs_pods.gp", gp);
  Proc g = spawn({"/usr/bin/gnuplot", o_.out_dir + "/latency_vs_pods.gp"}, {"PATH=/usr/bin:/bin"}, "");
  if (!g.ok()) throw std::runtime_error("gnuplot failed (install gnuplot-nox; scripts/bench does): " + g.describe());
  progress_.line("wrote " + o_.out_dir + "/results.json, results.md, latency_vs_pods.png");
  std::fputs(md.str().c_str(), stdout);
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  std::string scratch;
  int rc = 0;
  try {
    Options o = parse_options(argc, argv);
    o.out_dir = fs::absolute(o.out_dir).string();
    char tmpl[4096];
    std::snprintf(tmpl, sizeof tmpl, "%s/plumb-bench.XXXXXX", o.scratch_parent.c_str());
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error(std::string("mkdtemp in ") + o.scratch_parent + ": " + std::strerror(errno));
    scratch = tmpl;
    enter_private_root(scratch + "/bpf");
    Bench b(o, scratch);
    b.setup();
    b.preflight();
    b.phase_latency();
    b.phase_throughput();
    b.phase_fill();
    b.report();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nplumb-bench: FAILED: %s\n", e.what());
    rc = 1;
  }
  if (!scratch.empty()) {
    umount2((scratch + "/bpf").c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  return rc;
}
