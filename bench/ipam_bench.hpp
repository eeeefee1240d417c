// What the cluster IPAM throughput benches share (ipam_etcd_bench.cpp, ipam_kube_bench.cpp): a
// private network namespace for their servers, fatal errors, the start gun of the client
// processes, and percentiles.
#pragma once

#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace plumb::bench::ipam {

/// Prints "<program>: <what>: <errno text>" and exits 1.
[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what.c_str(), std::strerror(errno));
  std::exit(1);
}

/// A private network namespace with lo up: the servers and their clients never touch the host's.
inline void enter_private_netns() {
  if (::unshare(CLONE_NEWNET) != 0) die("unshare(CLONE_NEWNET) (run as root)");
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) die("SIOCSIFFLAGS lo");
  ::close(fd);
}

/// A client process waits here until the parent closes the gun's write end (all start at once).
inline void wait_for_gun(int fd) {
  char b;
  while (::read(fd, &b, 1) > 0) {
  }
}

/// The p-quantile (0..1) of `v`, nearest rank; 0 for no values.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

/// What the clients of one round reported: one line "<ms> <a> <b>" per ADD ("ERR <text>" lines
/// are printed to stderr), summed.
struct Round {
  double seconds = 0;      // from the start gun to the last client's exit
  bool ok = true;          // every client exited 0
  std::vector<double> ms;  // ADD latencies
  double a = 0, b = 0;     // the sums of the lines' second and third numbers
};

/// Forks `clients` processes running `body(index, out_file, gun_fd)` (which writes its lines to
/// out_file, waits with wait_for_gun(gun_fd) and _exits), starts them at once and collects them.
inline Round run_round(int clients, const std::string& out_prefix,
                       const std::function<void(int, const std::string&, int)>& body) {
  int gun[2];
  if (::pipe(gun) != 0) die("pipe");
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int c = 0; c < clients; ++c) {
    outs.push_back(out_prefix + std::to_string(c));
    pid_t pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      ::close(gun[1]);
      body(c, outs.back(), gun[0]);
      ::_exit(3);
    }
    pids.push_back(pid);
  }
  ::close(gun[0]);
  const auto t0 = std::chrono::steady_clock::now();
  ::close(gun[1]);  // start
  Round r;
  for (pid_t p : pids) {
    int st = 0;
    ::waitpid(p, &st, 0);
    r.ok = r.ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& o : outs) {
    std::ifstream f(o);
    for (std::string line; std::getline(f, line);) {
      double ms = 0, a = 0, b = 0;
      if (line.rfind("ERR", 0) == 0) {
        std::fprintf(stderr, "%s\n", line.c_str());
      } else if (std::sscanf(line.c_str(), "%lf %lf %lf", &ms, &a, &b) == 3) {
        r.ms.push_back(ms);
        r.a += a;
        r.b += b;
      }
    }
  }
  return r;
}

}  // namespace plumb::bench::ipam
