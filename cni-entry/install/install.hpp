// `plumb install` and `plumb uninstall`: put plumb on a node the way operators install Multus
// (a DaemonSet's container runs `plumb install --watch`, deploy/thin/daemonset.yaml).
//
//   plumb install --cni-bin-dir DIR --cni-conf-dir DIR [--host-cni-conf-dir DIR]
//                 [--service-account-dir DIR] [--plugin-config JSON] [--thick] [--watch
//                 [--interval-seconds N] [--keep-config-on-exit]]
//   plumb uninstall --cni-conf-dir DIR
//
// install copies the running binary atomically into the bin dir as `plumb`, writes a kubeconfig
// built from the service account (when KUBERNETES_SERVICE_HOST is set) and `00-plumb.conflist`
// whose clusterNetwork is the node's primary CNI config (node_config.hpp). With --watch it then
// re-reads the conf dir and the service account every interval, rewrites what changed (a new
// primary config, a rotated token), and on SIGTERM/SIGINT removes the conflist and kubeconfig
// (Multus's cleanup-config-on-exit) unless --keep-config-on-exit. uninstall removes them; the
// binary stays (pods attached by plumb still need it for their DEL). With --thick (thick mode,
// deploy/thick/daemonset.yaml) plumb-shim, found beside the running binary, is copied too, and the
// conflist's plugin is "plumb-shim": runtimes execute the shim, which hands each invocation to
// the node's `plumb daemon` (or runs the copied plumb when no daemon answers).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::install {

/// The command line of `plumb install` / `plumb uninstall`, and the environment they read.
struct Options {
  bool uninstall = false;
  std::string cni_bin_dir;          ///< --cni-bin-dir: where the binary is copied (install: required)
  std::string cni_conf_dir;         ///< --cni-conf-dir: where the conflist is written (required)
  std::string host_cni_conf_dir;    ///< --host-cni-conf-dir: the conf dir as the node names it (default: cni_conf_dir)
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";  ///< --service-account-dir
  std::string plugin_config;        ///< --plugin-config: JSON object of further keys for plumb's plugin entry
  std::string binary = "/proc/self/exe";  ///< the binary to copy: the running one
  bool thick = false;               ///< --thick: also install the plumb-shim beside the binary, and name it in the conflist
  bool watch = false;               ///< --watch
  std::chrono::milliseconds interval{1000};  ///< --interval-seconds (0.1..3600)
  bool keep_config_on_exit = false; ///< --keep-config-on-exit
  std::string service_host;         ///< KUBERNETES_SERVICE_HOST ("" = no kubeconfig)
  std::string service_port;         ///< KUBERNETES_SERVICE_PORT
};

/// Parses `args` (what follows "install" or "uninstall"; `uninstall` says which) and the two
/// environment variables read through `getenv`. Errors: kInvalidConfig naming the unknown flag,
/// the flag without its value, a bad --interval-seconds, or the missing required directory.
[[nodiscard]] Result<Options> parse_options(bool uninstall, const std::vector<std::string>& args,
                                            const std::function<const char*(const char*)>& getenv);

/// Copies `from` into `bin_dir/name` atomically (a temporary file in bin_dir, fsync, mode 0755,
/// rename over the old one, so a runtime never runs a half-written binary). Errors: kIo naming
/// the path.
[[nodiscard]] Status copy_binary(const std::string& from, const std::string& bin_dir, const std::string& name = "plumb");

/// What one pass changed.
struct Outcome {
  std::string primary;       ///< the primary config file name ("" = none found: conflist removed)
  bool conflist_written = false;
  bool kubeconfig_written = false;
};

/// One pass: reads the conf dir and the service account, writes the kubeconfig and the conflist
/// where their content differs from what is on disk (atomically, 0600), and removes the conflist
/// when the conf dir holds no primary config any more. Errors: from reading the primary config,
/// the service account, --plugin-config, or writing (kIo naming the path); nothing is changed by
/// a pass that fails before writing.
[[nodiscard]] Result<Outcome> apply(const Options& opts);

/// Removes plumb's conflist and its kubeconfig directory from the conf dir (missing is fine).
/// Errors: kIo naming the path that cannot be removed.
[[nodiscard]] Status remove_config(const std::string& conf_dir);

/// `plumb install ...` / `plumb uninstall ...` (argv[1] is the subcommand): the exit status.
/// Messages go to stderr.
int command_main(int argc, char** argv);

}  // namespace plumb::install
