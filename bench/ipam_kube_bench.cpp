// Cluster IPAM throughput on whereabouts' Kubernetes datastore next to the etcd one (not a test;
// built on demand: `cmake --build build --target ipam_kube_bench`). Allocations per second at 1, 4
// and 16 concurrent clients, each a separate process with its own node name and API client (as
// nodes of a cluster are), and the API requests one ADD costs. The API server is the test server
// (tests/support/kube_api_test_server.py: Python, TLS, objects in files) and etcd is Debian's
// etcd-server, both started by the bench on 127.0.0.1 in a private network namespace (needs root)
// and stopped by pid at the end. Pools are in 198.18.0.0/15 (RFC 2544, for benchmarking); nothing
// is configured on any interface. The API test server is far slower than a real kube-apiserver
// (one Python process, every write saved to a file): compare the datastores' request counts and
// their scaling with clients, not absolute rates with a real cluster.
//
//   ipam_kube_bench [--adds M]    (M = ADDs per row, split between the clients; default 800)
//
// Rows: kubernetes (whereabouts' default, overlapping ranges on: one more write per ADD),
// kubernetes without overlapping ranges, kubernetes with node slices, etcd. Prints allocations/s,
// ADD latency p50/p99 (ms), API (or etcd) requests per ADD and writes lost to another client per
// ADD, with the machine's load average before and after.
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/json.hpp"
#include "bench/ipam_bench.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace {

namespace cl = plumb::ipam::cluster;
using namespace plumb::bench::ipam;  // NOLINT(google-build-using-namespace): the benches' shared helpers
using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The API test server in `dir`; returns its pid and port.
std::pair<pid_t, int> start_api(const std::string& dir) {
  std::string script = std::string(PLUMB_FIXTURES) + "/../support/kube_api_test_server.py";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokens") << "bench\n";
  pid_t pid = ::fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    int log = ::open((dir + "/server.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execlp("python3", "python3", script.c_str(), "--dir", dir.c_str(), "--port", "0", nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 600; ++i) {
    std::string p = slurp(dir + "/port");
    if (!p.empty()) return {pid, std::atoi(p.c_str())};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  die("the API test server did not start: " + slurp(dir + "/server.log"));
}

/// One datastore configuration of a row.
struct Variant {
  const char* label;
  std::string ipam;  // the "ipam" object without its closing brace; the row adds network_name
  bool kube;
};

/// Child body: `adds` ADDs as `node`, one line per ADD "<ms> <requests> <lost writes>" to `out`.
[[noreturn]] void client(const Variant& v, const std::string& text, const std::string& node, int adds, int port,
                         const std::string& api_dir, const std::string& out, int gun) {
  wait_for_gun(gun);
  std::ofstream f(out);
  auto d = plumb::json::parse(text, "ipam");
  auto cfg = cl::parse_config(*d);
  if (!cfg) {
    f << "ERR " << cfg.error().text() << "\n";
    ::_exit(2);
  }
  std::unique_ptr<cl::KubeClusterIpam> kube;
  std::unique_ptr<cl::ClusterIpam> etcd;
  if (v.kube) {
    plumb::k8s::Credentials c;
    c.server = "https://127.0.0.1:" + std::to_string(port);
    c.ca_file = api_dir + "/tls/ca.crt";
    c.token = "bench";
    kube = cl::make_kube(std::move(*cfg), node, std::make_unique<plumb::k8s::Client>(c, plumb::k8s::Options{}), "bench");
  } else {
    auto e = cl::make(*d, node);
    if (!e) ::_exit(2);
    etcd = std::move(*e);
  }
  plumb::ipam::Ipam& ipam = kube ? static_cast<plumb::ipam::Ipam&>(*kube) : *etcd;
  for (int i = 0; i < adds; ++i) {
    plumb::ipam::Request req;
    req.container_id = node + "-" + std::to_string(i);
    req.ifname = "net1";
    req.network_name = "bench";
    req.cni_args = {{"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", req.container_id}};
    auto t0 = Clock::now();
    auto r = ipam.add(req);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!r) {
      f << "ERR " << r.error().text() << "\n";
      f.close();
      ::_exit(1);
    }
    uint64_t requests = kube ? kube->last_stats().requests : etcd->last_add_stats().requests;
    int lost = kube ? kube->last_stats().conflicts : etcd->last_add_stats().claims - 1;
    f << ms << " " << requests << " " << lost << "\n";
  }
  f.close();
  ::_exit(0);
}

std::string loadavg() {
  std::string s = slurp("/proc/loadavg");
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

/// One row: `clients` processes share `total` ADDs on a fresh pool. Returns false if one failed.
bool row(const Variant& v, int clients, int total, int port, const std::string& api_dir, const std::string& dir, int n) {
  const int per = total / clients;
  const std::string text = v.ipam + R"(, "network_name": "b)" + std::to_string(n) + "\"}";
  auto r = run_round(clients, dir + "/r" + std::to_string(n) + "-", [&](int c, const std::string& out, int gun) {
    client(v, text, "bench-node-" + std::to_string(c), per, port, api_dir, out, gun);
  });
  const double cnt = static_cast<double>(r.ms.size());
  std::printf("%-28s %7d %10.0f %9.2f %9.2f %9.2f %9.3f%s\n", v.label, clients, cnt / r.seconds, percentile(r.ms, 0.5),
              percentile(r.ms, 0.99), cnt > 0 ? r.a / cnt : 0, cnt > 0 ? r.b / cnt : 0, r.ok ? "" : "  (a client failed)");
  std::fflush(stdout);
  return r.ok;
}

}  // namespace

int main(int argc, char** argv) {
  int total = 800;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--adds") total = std::atoi(argv[i + 1]);
  }
  if (total < 16 || total > 3000) {
    std::fprintf(stderr, "usage: ipam_kube_bench [--adds 16..3000]\n");
    return 2;
  }
  enter_private_netns();
  char tmpl[] = "/tmp/plumb-kube-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
  const std::string dir = tmpl;
  auto [api_pid, port] = start_api(dir + "/api");
  plumb::test::EtcdCluster etcd(1, 32379);
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd did not start:\n%s\n", etcd.log(0).c_str());
    ::kill(api_pid, SIGTERM);
    return 1;
  }
  const std::string load_before = loadavg();
  std::printf("%d ADDs per row; API test server (Python, TLS) and etcd 3.4 on loopback; load average before: %s\n", total,
              load_before.c_str());
  std::printf("%-28s %7s %10s %9s %9s %9s %9s\n", "datastore", "clients", "allocs/s", "p50 ms", "p99 ms", "req/ADD", "lost/ADD");
  const std::vector<Variant> variants = {
      {"kubernetes", R"({"type": "whereabouts", "range": "198.18.0.0/20")", true},
      {"kubernetes, no overlapping", R"({"type": "whereabouts", "range": "198.18.0.0/20", "enable_overlapping_ranges": false)", true},
      {"kubernetes, node slices /22", R"({"type": "whereabouts", "range": "198.18.0.0/16", "node_slice_size": "/22")", true},
      {"etcd", R"({"type": "whereabouts", "range": "198.18.0.0/20", "etcd_endpoints": )" + etcd.endpoints_json(), false},
  };
  bool ok = true;
  int n = 0;
  for (const auto& v : variants) {
    for (int clients : {1, 4, 16}) ok = row(v, clients, total, port, dir + "/api", dir, n++) && ok;
  }
  std::printf("load average after: %s\n", loadavg().c_str());
  ::kill(api_pid, SIGTERM);
  ::waitpid(api_pid, nullptr, 0);
  std::string rm = "rm -rf '" + dir + "'";
  if (std::system(rm.c_str()) != 0) ok = false;
  return ok ? 0 : 1;
}
