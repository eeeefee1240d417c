// Cluster IPAM throughput (not a test): allocations per second against a real etcd at 1, 4 and
// 16 concurrent clients. Each client is a separate process with its own node name (as nodes of
// a cluster are), allocating from one shared /16 (198.18.0.0/16, RFC 2544 benchmarking range;
// nothing is configured on any interface). Every run uses a fresh pool (network_name) on the
// same etcd, started by the bench on 127.0.0.1 in a private network namespace (needs root) and
// stopped by pid at the end.
//
//   ipam_etcd_bench [--members N] [--adds M]    (M = ADDs per client count level, default 1600)
//
// Prints, per concurrency: allocations/s, ADD latency p50/p99 (ms), mean etcd requests and
// claim transactions per ADD (claims > 1 means a candidate was lost to another client).
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "bench/ipam_bench.hpp"
#include "ipam/cluster.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace {

namespace cl = plumb::ipam::cluster;
using namespace plumb::bench::ipam;  // NOLINT(google-build-using-namespace): the benches' shared helpers
using Clock = std::chrono::steady_clock;

struct ClientResult {
  std::vector<double> latency_ms;
  uint64_t requests = 0;
  uint64_t claims = 0;
  bool ok = false;
  std::string error;
};

/// Child body: `adds` ADDs as `node`, one line per ADD "<ms> <requests> <claims>" to `out`.
[[noreturn]] void client(const std::string& ipam_text, const std::string& node, int adds, const std::string& out, int gun) {
  wait_for_gun(gun);
  std::ofstream f(out);
  auto d = plumb::json::parse(ipam_text, "ipam");
  if (!d) ::_exit(2);
  auto ipam = cl::make(*d, node);
  if (!ipam) {
    f << "ERR " << ipam.error().text() << "\n";
    f.close();
    ::_exit(2);
  }
  for (int i = 0; i < adds; ++i) {
    plumb::ipam::Request req;
    req.container_id = node + "-" + std::to_string(i);
    req.ifname = "net1";
    auto t0 = Clock::now();
    auto r = (*ipam)->add(req);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!r) {
      f << "ERR " << r.error().text() << "\n";
      f.close();
      ::_exit(1);
    }
    const auto& st = (*ipam)->last_add_stats();
    f << ms << " " << st.requests << " " << st.claims << "\n";
  }
  f.close();
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  int members = 1, total_adds = 1600;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--members") members = std::atoi(argv[i + 1]);
    if (a == "--adds") total_adds = std::atoi(argv[i + 1]);
  }
  if (members < 1 || total_adds < 16) {
    std::fprintf(stderr, "usage: ipam_etcd_bench [--members N>=1] [--adds M>=16]\n");
    return 2;
  }
  enter_private_netns();
  plumb::test::EtcdCluster etcd(members, 32379);
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd did not start:\n%s\n", etcd.log(0).c_str());
    return 1;
  }
  char tmpl[] = "/tmp/plumb-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
  const std::string dir = tmpl;
  std::printf("etcd %s, %d member(s), data on %s; %d ADDs per level, one /16 pool per level\n",
              "3.4 (Debian etcd-server)", members, etcd.dir().c_str(), total_adds);
  std::printf("%8s %10s %10s %10s %12s %12s\n", "clients", "allocs/s", "p50 ms", "p99 ms", "req/ADD", "claims/ADD");
  int status_all = 0;
  for (int clients : {1, 4, 16}) {
    const int per = total_adds / clients;
    const std::string text = R"({"type": "plumb-cluster", "range": "198.18.0.0/16", "network_name": "bench-)" +
                             std::to_string(clients) + R"(", "etcd_endpoints": )" + etcd.endpoints_json() + "}";
    auto r = run_round(clients, dir + "/c" + std::to_string(clients) + "-", [&](int c, const std::string& out, int gun) {
      client(text, "bench-node-" + std::to_string(c), per, out, gun);
    });
    const double n = static_cast<double>(r.ms.size());
    std::printf("%8d %10.0f %10.2f %10.2f %12.2f %12.3f%s\n", clients, n / r.seconds, percentile(r.ms, 0.5),
                percentile(r.ms, 0.99), n > 0 ? r.a / n : 0, n > 0 ? r.b / n : 0, r.ok ? "" : "  (a client failed)");
    std::fflush(stdout);
    if (!r.ok) status_all = 1;
  }
  std::string rm = "rm -rf '" + dir + "'";
  if (std::system(rm.c_str()) != 0) status_all = 1;
  return status_all;
}
