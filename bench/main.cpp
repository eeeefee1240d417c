// plumb-bench: pod set-up latency of plumb against the reference CNI plugins and the kernel
// floor, measured in one run on one machine (bench/README.md explains the output; bench.hpp
// what is measured and how).
//   harness.*    clocks, files, progress, timed child processes, namespaces
//   options.*    the command line
//   scenarios.cpp the networks of scenarios a/b/c
//   ways.cpp     plumb, the reference chain and the floor, and the ADD/DEL verification
//   bench.cpp    set-up, preflight and the latency / throughput / fill phases
//   api.cpp      the API phase: pods and NADs from the Kubernetes API test server
//   report.cpp   results.json, results.md, the plot (api_report.cpp: the API phase's tables)
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "bench/bench.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace bench;
  std::string scratch;
  bool created_cni_state = false;
  int rc = 0;
  std::optional<Bench> b;
  try {
    // A child that exits before reading its stdin (a plugin answering VERSION) must not kill the
    // bench: spawn() sees EPIPE and goes on.
    ::signal(SIGPIPE, SIG_IGN);
    Options o = parse_options(argc, argv);
    o.out_dir = fs::absolute(o.out_dir).string();
    std::string tmpl = o.scratch_parent + "/plumb-bench.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp in " + o.scratch_parent + ": " + std::strerror(errno));
    scratch = tmpl;
    enter_private_root(scratch + "/bpf");
    if (!o.conflists.empty()) created_cni_state = private_cni_state();
    b.emplace(o, scratch);
    b->setup();
    b->preflight();
    if (o.runs("startup")) b->phase_startup();
    if (o.runs("latency")) b->phase_latency();
    if (o.runs("throughput")) b->phase_throughput();
    if (o.runs("fill")) b->phase_fill();
    if (o.runs("api")) b->phase_api();
    report(b->results());
    b->progress().line("wrote " + o.out_dir + "/results.json, results.md, latency_vs_pods.png");
  } catch (const std::exception& e) {
    // Where the run was (the progress line's last text) with the error: a failure never comes
    // out as a bare library message.
    const std::string where = b ? b->progress().current() : std::string();
    std::fprintf(stderr, "\nplumb-bench: FAILED%s%s: %s\n", where.empty() ? "" : " during ", where.c_str(), e.what());
    rc = 1;
  }
  b.reset();  // the daemons stop before their scratch directory goes
  if (created_cni_state) {
    umount2(kCniStateDir, MNT_DETACH);
    ::rmdir(kCniStateDir);
  }
  if (!scratch.empty()) {
    umount2((scratch + "/bpf").c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  return rc;
}
