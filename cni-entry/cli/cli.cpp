// plumb's command line (see cli.hpp): the one file that includes CLI11.
#include "cni-entry/cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cni-entry/daemon/pod_jobs.hpp"
#include "cni-entry/deferred_init.hpp"
#include "engine/base/text.hpp"
#include "engine/cni/cni.hpp"
#include "plumb/version.hpp"

// This file's static objects (CLI11's validators, <iostream>'s streams) are constructed by
// parse(), never at the start of a CNI invocation: the build moves this object's initialisers
// into the deferred section (cni-entry/deferred_init.hpp).

namespace plumb::cli {
namespace {

constexpr const char* kDescription =
    "plumb: the Network Plumbing WG's multi-network standard (Multus), the reference CNI plugins, sriov-cni and\n"
    "whereabouts in one netlink-native CNI plugin, with its node daemon and installer.\n\n"
    "A container runtime runs plumb without arguments: CNI_COMMAND and the other CNI_* variables in the\n"
    "environment, the network configuration on stdin, the result or CNI error on stdout. An operator runs\n"
    "its subcommands.";

/// "plumb <version>" and the CNI versions this plumb speaks.
std::string version_text() {
  std::string s = std::string("plumb ") + version::kFull + "\nCNI protocol versions supported: ";
  for (const auto& v : cni::supported_versions()) s += v + (&v == &cni::supported_versions().back() ? "" : ", ");
  return s;
}

/// Stores a number of seconds given as text (text::parse_decimal: no floating from_chars) in
/// `out`, when it lies in [min, max] (`min` excluded when `min_open`); else a usage error naming
/// the option and the value.
std::function<void(const std::string&)> seconds_into(double& out, const std::string& option, double min, bool min_open,
                                                     double max) {
  return [&out, option, min, min_open, max](const std::string& v) {
    const auto s = text::parse_decimal(v);
    if (!s || (min_open ? !(*s > min) : !(*s >= min)) || !(*s <= max)) {
      std::ostringstream range;
      range << (min_open ? "(" : "[") << min << ", " << max << "]";
      throw CLI::ValidationError(option, "\"" + v + "\" is not a number of seconds in " + range.str());
    }
    out = *s;
  };
}

void add_install(CLI::App& app, install::Options& o, double& interval) {
  CLI::App* in = app.add_subcommand(
      "install",
      "Install plumb on this node: copy the running binary into the CNI bin dir and write 00-plumb.conflist around the "
      "node's primary CNI config (a DaemonSet's container runs it with --watch).");
  in->add_option("--cni-bin-dir", o.cni_bin_dir, "where plumb (and plumb-shim with --thick) is copied")->required()->type_name("DIR");
  in->add_option("--cni-conf-dir", o.cni_conf_dir, "where the primary CNI config is read and the conflist written")
      ->required()
      ->type_name("DIR");
  in->add_option("--host-cni-conf-dir", o.host_cni_conf_dir,
                 "the conf dir as the node names it, for the paths in the conflist (default: --cni-conf-dir)")
      ->type_name("DIR");
  in->add_option("--service-account-dir", o.service_account_dir,
                 "the service account the kubeconfig is made from, with KUBERNETES_SERVICE_HOST set (default: " +
                     o.service_account_dir + ")")
      ->type_name("DIR");
  // The last one given wins, as plumb's parser has always taken it: an operator's own
  // --plugin-config appended to a manifest's command replaces the manifest's.
  in->add_option("--plugin-config", o.plugin_config,
                 "a JSON object of plumb's own config keys for its plugin entry (the last one given wins)")
      ->type_name("JSON")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  in->add_flag("--thick", o.thick, "thick mode: also install plumb-shim (beside plumb) and name it in the conflist");
  in->add_flag("--watch", o.watch, "keep running: follow the primary config and the service account every interval");
  in->add_option_function<std::string>("--interval-seconds", seconds_into(interval, "--interval-seconds", 0.1, false, 3600),
                                       "seconds between two passes of --watch, 0.1-3600 (default: 1)")
      ->type_name("SECONDS");
  in->add_flag("--cleanup-config-on-exit", o.cleanup_on_exit,
               "remove the conflist and kubeconfig on SIGTERM/SIGINT; implies --watch (Multus's; default: false, they "
               "are kept, so that a rollout never leaves the node without plumb's conflist)");
  in->add_flag_callback("--keep-config-on-exit", [&o] { o.cleanup_on_exit = false; },
                        "keep them on exit: --cleanup-config-on-exit=false");
  in->add_option("--multus-master-cni-file-name", o.primary_name,
                 "the primary CNI config's file name in --cni-conf-dir (Multus's; default: the lexically first "
                 ".conf, .conflist or .json)")
      ->type_name("NAME");
  in->add_option("--cni-version", o.cni_version,
                 "fail when the primary CNI config's cniVersion is another (Multus's; default: take the primary's)")
      ->type_name("VERSION");
  in->add_flag("--rename-conf-file", o.rename_primary,
               "rename the primary CNI config NAME to NAME.old once the conflist names it, so that runtimes find "
               "plumb's alone (Multus's; uninstall and --cleanup-config-on-exit give the name back)");
  in->add_option("--multus-kubeconfig-file-host", o.kubeconfig_host,
                 "the kubeconfig path the conflist names, as the node sees it (Multus's; default: the kubeconfig "
                 "written, under --host-cni-conf-dir)")
      ->type_name("PATH");
  in->footer("The conflist is kept when plumb install ends; `plumb uninstall` removes it. The binary stays.");

  CLI::App* un = app.add_subcommand(
      "uninstall",
      "Remove plumb's conflist and kubeconfig from the conf dir (the binary stays: pods attached by plumb need it "
      "for their DEL).");
  un->add_option("--cni-conf-dir", o.cni_conf_dir, "the conf dir plumb install wrote to")->required()->type_name("DIR");
}

void add_daemon(CLI::App& app, daemon::Options& o) {
  CLI::App* d = app.add_subcommand(
      "daemon",
      "Keep plumb warm for plumb-shim (thick mode): serve the CNI invocations plumb-shim hands over on a unix "
      "socket with a pool of worker processes, until SIGTERM.");
  d->add_option("--socket", o.socket, std::string("the unix socket plumb-shim connects to (default: ") + o.socket + ")")
      ->type_name("PATH");
  d->add_option("--workers", o.workers,
                "warm worker processes kept, 1-256 (default: 4); an invocation finding none idle gets a worker "
                "forked for it alone")
      ->check(CLI::Range(1, 256))
      ->type_name("N");
  d->add_option("--requests-per-worker", o.requests_per_worker,
                "invocations a worker serves before it is replaced, 1-1000000 (default: 256)")
      ->check(CLI::Range(1, 1'000'000))
      ->type_name("N");
  d->add_option("--usage-log", o.usage_log,
                "append one line per invocation to this file: worker pid, exit code, CPU, minor faults, peak RSS")
      ->type_name("FILE");
  d->add_option("--kubeconfig", o.kubeconfig,
                "the API server whose pods, NADs and IPAMClaims the daemon watches for its workers (default: the "
                "in-cluster service account, when there is one)")
      ->type_name("PATH");
  d->add_option("--node-name", o.node_name,
                "watch the pods of this node (default: $NODE_NAME); without one, nothing is watched and workers "
                "read every object from the API server")
      ->envname("NODE_NAME")
      ->type_name("NODE");
  d->add_option(
       "--cni-config", o.cni_config,
       "plumb's conflist on the node (its plumb-shim plugin: plumb's configuration) for the hot-plug of the watched "
       "pods and the release of deleted pods' addresses (default: /etc/cni/net.d/00-plumb.conflist)")
      ->type_name("PATH");
  d->add_option_function<std::string>(
       "--log-format", [&o](const std::string& f) { o.json_log = f == "json"; },
       "each invocation's line on stderr (verb, pod, container ID, interface, networks, result code, duration): "
       "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->type_name("FORMAT");
  d->add_option("--metrics-bind-address", o.metrics_bind_address,
                "serve /metrics (Prometheus text format), /healthz and /readyz on this address, e.g. 127.0.0.1:9091 "
                "or [::1]:9091 (default: not served)")
      ->type_name("HOST:PORT");
}

void add_reconcile(CLI::App& app, reconcile::Options& o) {
  CLI::App* r = app.add_subcommand(
      "reconcile",
      "Release the cluster IPAM's allocations whose owner is gone, in whereabouts' objects and the etcd pools NADs "
      "name (whereabouts' ip-reconciler; run it as a CronJob).");
  r->add_flag("--dry-run", o.dry_run, "print what would be released, write nothing");
  r->add_option("--kubeconfig", o.kubeconfig, "API credentials (default: the in-cluster service account)")->type_name("PATH");
  r->add_option("--namespace", o.ns,
                "where whereabouts' objects live (default: $WHEREABOUTS_NAMESPACE, else the credentials' namespace, "
                "else kube-system)")
      ->type_name("NS");
  r->add_option_function<std::string>("--timeout", seconds_into(o.timeout_seconds, "--timeout", 0, true, 3600),
                                      "limit of one API request in seconds, (0, 3600] (default: 30)")
      ->type_name("SECONDS");
}

/// `c` as a usage error of `who` ("plumb" or "plumb SUBCOMMAND").
Command usage_error(Command c, const std::string& who, const std::string& what) {
  c.kind = Command::Kind::kPrint;
  c.exit_code = 2;
  c.err = who + ": " + what + "\nRun `" + who + " --help` for its usage.\n";
  return c;
}

}  // namespace

Command parse(const std::vector<std::string>& args, const std::function<const char*(const char*)>& getenv) {
  deferred_init::run();
  Command c;
  double interval = 1;
  CLI::App app(kDescription, "plumb");
  app.set_version_flag("--version", version_text());
  app.require_subcommand(0, 1);
  app.get_formatter()->column_width(44);
  app.footer("Run `plumb SUBCOMMAND --help` for a subcommand's options; each option also as --option=VALUE.");
  add_install(app, c.install, interval);
  add_daemon(app, c.daemon);
  add_reconcile(app, c.reconcile);

  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  const auto who = [&app] {
    for (const CLI::App* sub : app.get_subcommands()) return "plumb " + sub->get_name();
    return std::string("plumb");
  };
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    c.exit_code = app.exit(e, out, err);
    if (c.exit_code != 0) return usage_error(std::move(c), who(), e.what());
    c.out = out.str();
    return c;
  }
  if (app.get_subcommands().empty()) return usage_error(std::move(c), "plumb", "a subcommand is required (install, uninstall, daemon or reconcile)");
  const std::string sub = app.get_subcommands().front()->get_name();
  if (sub == "daemon") {
    c.kind = Command::Kind::kDaemon;
  } else if (sub == "reconcile") {
    c.kind = Command::Kind::kReconcile;
  } else {
    c.kind = Command::Kind::kInstall;
    c.install.uninstall = sub == "uninstall";
    c.install.interval = std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(interval));
    if (auto done = install::complete_options(c.install, getenv); !done) return usage_error(std::move(c), who(), done.error().msg);
  }
  return c;
}

std::optional<Command> answer_before_parsing(const std::vector<std::string>& args) {
  if (args.size() != 2 || args[1] != "--version") return std::nullopt;
  Command c;
  c.out = version_text() + "\n";  // as CLI11's exit() prints its CallForVersion
  return c;
}

int run(int argc, char** argv, daemon::CniMain cni_main) {
  const std::vector<std::string> args(argv, argv + argc);
  std::optional<Command> early = answer_before_parsing(args);
  const Command c = early ? std::move(*early) : parse(args, [](const char* name) { return std::getenv(name); });
  switch (c.kind) {
    case Command::Kind::kInstall:
      return install::run(c.install);
    case Command::Kind::kDaemon: {
      // The node agent's features on the watched pods: hot-plug, the release of deleted pods' addresses.
      daemon::pod_jobs::Starter jobs(c.daemon.cni_config);
      daemon::Options o = c.daemon;
      o.pod_observers.push_back(&jobs);
      return daemon::run(o, cni_main);
    }
    case Command::Kind::kReconcile:
      return reconcile::run(c.reconcile);
    case Command::Kind::kPrint:
      break;
  }
  std::fputs(c.out.c_str(), stdout);
  std::fflush(stdout);
  std::fputs(c.err.c_str(), stderr);
  return c.exit_code;
}

}  // namespace plumb::cli
