// `plumb install` and `plumb uninstall`: put plumb on a node the way operators install Multus
// (a DaemonSet's container runs `plumb install --watch`, deploy/thin/daemonset.yaml). Their command
// lines are cni-entry/cli/cli.cpp's (`plumb install --help`).
//
// install copies the running binary atomically into the bin dir as `plumb`, writes a kubeconfig
// built from the service account (when KUBERNETES_SERVICE_HOST is set) and `00-plumb.conflist`
// whose clusterNetwork is the node's primary CNI config (node_config.hpp). With --watch it then
// re-reads the conf dir and the service account every interval and rewrites what changed (a new
// primary config, a rotated token). On SIGTERM/SIGINT it keeps the conflist and kubeconfig, as
// Multus's `cleanup-config-on-exit: false` does: a DaemonSet rollout never leaves a node without
// plumb's conflist. --cleanup-config-on-exit removes them on exit (and implies --watch, as it
// makes Multus's entrypoint watch); `plumb uninstall` removes them. The binary stays (pods
// attached by plumb still need it for their DEL). With --thick (thick mode,
// deploy/thick/daemonset.yaml) plumb-shim, found beside the running binary, is copied too, and the
// conflist's plugin is "plumb-shim": runtimes execute the shim, which hands each invocation to
// the node's `plumb daemon` (or runs the copied plumb when no daemon answers).
//
// Multus's installer options keep their meaning (its thin entrypoint, cmd/thin_entrypoint):
// --multus-master-cni-file-name picks the primary config by name instead of the lexically first,
// --cni-version fails a pass whose primary config has another cniVersion, --rename-conf-file
// renames the primary config NAME to NAME.old once the conflist names it (so a runtime finds only
// plumb's), --multus-kubeconfig-file-host is the kubeconfig path the conflist names.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::install {

/// The command line of `plumb install` / `plumb uninstall` (cni-entry/cli/cli.cpp fills it), and
/// the environment they read.
struct Options {
  bool uninstall = false;
  std::string cni_bin_dir;          ///< --cni-bin-dir: where the binary is copied (install: required)
  std::string cni_conf_dir;         ///< --cni-conf-dir: where the conflist is written (required)
  std::string host_cni_conf_dir;    ///< --host-cni-conf-dir: the conf dir as the node names it (default: cni_conf_dir)
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";  ///< --service-account-dir
  std::string plugin_config;        ///< --plugin-config: JSON object of further keys for plumb's plugin entry
  std::string binary = "/proc/self/exe";  ///< the binary to copy: the running one
  bool thick = false;               ///< --thick: also install the plumb-shim beside the binary, and name it in the conflist
  bool watch = false;               ///< --watch (also set by --cleanup-config-on-exit)
  std::chrono::milliseconds interval{1000};  ///< --interval-seconds (0.1..3600)
  bool cleanup_on_exit = false;     ///< --cleanup-config-on-exit; --keep-config-on-exit: false (the default)
  std::string primary_name;         ///< --multus-master-cni-file-name: the primary config's file name ("" = the lexically first)
  std::string cni_version;          ///< --cni-version: the cniVersion the primary config must have ("" = any)
  bool rename_primary = false;      ///< --rename-conf-file: the primary config NAME renamed NAME.old
  std::string kubeconfig_host;      ///< --multus-kubeconfig-file-host: the kubeconfig the conflist names ("" = the one written, as the node names it)
  std::string service_host;         ///< KUBERNETES_SERVICE_HOST ("" = no kubeconfig)
  std::string service_port;         ///< KUBERNETES_SERVICE_PORT
};

/// Checks a parsed command line and completes it: the required directories given as absolute
/// paths, --host-cni-conf-dir defaulted to --cni-conf-dir, --multus-master-cni-file-name a file
/// name, --cni-version one plumb supports, --multus-kubeconfig-file-host absolute, and the two
/// environment variables read through `getenv`. Errors: kInvalidConfig naming the flag and value.
[[nodiscard]] Status complete_options(Options& o, const std::function<const char*(const char*)>& getenv);

/// Copies `from` into `bin_dir/name` atomically (a temporary file in bin_dir, fsync, mode 0755,
/// rename over the old one, so a runtime never runs a half-written binary). Errors: kIo naming
/// the path.
[[nodiscard]] Status copy_binary(const std::string& from, const std::string& bin_dir, const std::string& name = "plumb");

/// What one pass changed.
struct Outcome {
  std::string primary;       ///< the primary config file name the conflist names ("" = none found: conflist removed)
  std::string renamed;       ///< the primary's name before this pass renamed it (--rename-conf-file); "" = not renamed
  bool conflist_written = false;
  bool kubeconfig_written = false;
};

/// One pass: reads the conf dir and the service account, writes the kubeconfig and the conflist
/// where their content differs from what is on disk (atomically, 0600), and removes the conflist
/// when the conf dir holds no primary config any more. With --rename-conf-file the primary NAME
/// becomes NAME.old, named by the conflist (first a link NAME.old, then the conflist, then NAME
/// removed). Errors: from reading the primary config, the service account, --plugin-config, a
/// --cni-version the primary does not have, or writing (kIo naming the path); nothing is changed
/// by a pass that fails before writing.
[[nodiscard]] Result<Outcome> apply(const Options& opts);

/// Removes plumb's conflist and its kubeconfig directory from the conf dir (missing is fine),
/// after giving a primary config --rename-conf-file renamed its name back (unless a file of that
/// name is there again). Errors: kIo naming the path that cannot be removed or renamed.
[[nodiscard]] Status remove_config(const std::string& conf_dir);

/// `plumb install` / `plumb uninstall` with complete options: the exit status (0, or 1 when a
/// step failed). Messages go to stderr.
int run(const Options& opts);

}  // namespace plumb::install
