// plumb's entry point as a CNI plugin: environment + stdin -> engine -> stdout JSON or CNI error;
// with arguments, its command line (cni-entry/cli/). Nothing else lives here.
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include "engine/cni/cni.hpp"
#include "engine/kernel/tun.hpp"
#include "cni-entry/cli/cli.hpp"
#include "cni-entry/daemon/daemon.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "cni-entry/pod/pod.hpp"
#include "plumb/version.hpp"

namespace {

const char* env_get(const char* name) { return std::getenv(name); }

/// All of standard input (the network configuration, spec section 3), read with read(2): through
/// std::cin it cost a getc per byte (libstdc++'s stdio-synchronised buffer).
std::string read_stdin() {
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

void print(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(1, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

/// Best-effort cniVersion of a config we could not fully parse, for the error JSON.
std::string version_of(const std::string& input) {
  auto doc = plumb::json::parse(input, "stdin");
  if (doc && doc->IsObject()) {
    auto v = plumb::json::get_string(*doc, "cniVersion", "config");
    if (v && *v && plumb::cni::version_supported(**v)) return **v;
  }
  return "1.1.0";
}

int report(const plumb::Error& e, const std::string& version, plumb::pod::Log& log) {
  log.error(e.text());
  print(plumb::cni::encode_error(e, version));
  return 1;
}

/// What plumb says when a person runs it without CNI_COMMAND: on stderr, as the reference
/// plugins' skel prints its "about" string and the CNI versions (then exits 0), plus where the
/// subcommands are. Reads nothing from stdin.
int about() {
  std::string s = std::string("CNI plumb plugin v") + plumb::version::kFull + "\nCNI protocol versions supported: ";
  const auto& versions = plumb::cni::supported_versions();
  for (size_t i = 0; i < versions.size(); ++i) s += (i == 0 ? "" : ", ") + versions[i];
  s += "\nA container runtime runs plumb with CNI_COMMAND and the other CNI_* variables set and the network\n"
       "configuration on stdin. `plumb --help` lists its subcommands (install, uninstall, daemon, reconcile).\n";
  (void)!::write(2, s.data(), s.size());
  return 0;
}

/// What a daemon worker logs of the invocation (daemon::Outcome).
void note_outcome(const plumb::cni::Env& env, const plumb::pod::Log& log, const plumb::Result<std::string>& out) {
  plumb::daemon::Outcome o;
  const char* verbs[] = {"ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC"};  // cni::Command's order
  const auto c = static_cast<size_t>(env.command);
  o.verb = c < std::size(verbs) ? verbs[c] : "?";
  if (auto name = env.arg("K8S_POD_NAME")) o.pod = env.arg("K8S_POD_NAMESPACE").value_or("default") + "/" + *name;
  o.container = env.container_id;
  o.ifname = env.ifname;
  o.networks = log.networks();
  if (!out) {
    o.code = out.error().cni_code;
    o.error = out.error().text();
  }
  plumb::daemon::note_outcome(std::move(o));
}

/// The CNI plugin: the CNI_* variables (through `getenv_fn`) and stdin in, result or CNI error on
/// stdout; the exit code. Run by main for an exec'd plumb (the process's environment) and by a
/// `plumb daemon` worker (cni-entry/daemon/: the request's, `in_daemon`) alike. CNI_COMMAND is looked
/// at first: without it nobody is going to write a configuration.
int cni_main(const char* (*getenv_fn)(const char*), bool in_daemon) {
  if (const char* command = getenv_fn("CNI_COMMAND"); command == nullptr || *command == '\0') return about();
  std::string input = read_stdin();
  plumb::pod::Log log;

  auto env = plumb::cni::Env::from(getenv_fn);
  if (!env) return report(env.error(), version_of(input), log);

  if (env->command == plumb::cni::Command::Version) {
    print(plumb::cni::encode_version_info(version_of(input)));
    return 0;
  }

  auto conf = plumb::pod::parse_config(input);
  if (!conf) {
    if (in_daemon) note_outcome(*env, log, std::unexpected(conf.error()));  // counted in the daemon's metrics too
    return report(conf.error(), version_of(input), log);
  }
  log.configure(conf->log_level, conf->log_file, conf->log_to_stderr);
  // The node name `plumb install` wrote into the conflist, for the cluster IPAM (ipam::cluster::
  // node_name) and delegated plugins; a NODE_NAME already set (a daemon's, from the downward API) wins.
  if (!conf->node_name.empty()) ::setenv("NODE_NAME", conf->node_name.c_str(), 0);
  // chrootDir is the node's root as the daemon's container mounts it (Multus's daemon key); the
  // same conflist reaches a plumb the runtime or the shim's fallback executes on the node itself.
  if (!in_daemon) conf->chroot_dir.clear();

  auto out = plumb::pod::run(*env, *conf, log);
  if (in_daemon) note_outcome(*env, log, out);
  if (!out) return report(out.error(), conf->cni_version, log);
  print(*out);
  return 0;
}

/// cni_main as a `plumb daemon` worker runs it (daemon::CniMain).
int cni_main_in_daemon(const char* (*getenv_fn)(const char*)) { return cni_main(getenv_fn, true); }

/// Keeps the heap an invocation grows until the process ends. glibc would otherwise give the top
/// of the heap back (brk) whenever 128 KiB are free there and serve each block over 128 KiB with
/// its own mmap/munmap, so one ADD faults the same pages in again and again; a `plumb daemon`'s
/// workers (forked after this) would do so at every invocation. Peak RSS is unchanged; CPU per
/// ADD and throughput improve (bench/RESULTS.md).
void keep_heap() {
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 16 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  // The tap driver re-executes plumb under an SELinux exec context to create a labelled device
  // (engine/kernel/tun.hpp). Any other argument is the command line of a person or a manifest:
  // `plumb --help`, `--version`, and the subcommands (cni-entry/cli/: install, uninstall,
  // reconcile, and daemon, plumb kept warm for plumb-shim). A runtime passes no arguments.
  if (argc >= 2 && std::string_view(argv[1]) == plumb::tun::kHelperArg) return plumb::tun::tap_helper_main(argc, argv);
  keep_heap();
  if (argc >= 2) return plumb::cli::run(argc, argv, cni_main_in_daemon);
  return cni_main(env_get, false);
}
