// What `plumb install` writes on a node, computed from what is there: the node's primary CNI
// config (the lexically first other config in the conf dir, as Multus's `--multus-conf-file=auto`
// picks it), plumb's conflist naming it as `clusterNetwork`, and a kubeconfig built from the
// installing pod's service account. Pure functions of files and inputs: nothing is written here
// (install.cpp writes).
#pragma once

#include <optional>
#include <string>

#include "engine/base/result.hpp"

namespace plumb::install {

/// The file name of plumb's conflist in the conf dir: sorts before the usual 10-.. primary
/// configs, so runtimes (which use the lexically first config) run plumb.
inline constexpr std::string_view kConflistName = "00-plumb.conflist";
/// The directory beside it holding what plumb's conflist refers to (its kubeconfig).
inline constexpr std::string_view kSupportDirName = "plumb.d";
/// plumb's kubeconfig, in kSupportDirName.
inline constexpr std::string_view kKubeconfigName = "plumb.kubeconfig";

/// What --rename-conf-file appends to the primary config's name (Multus's): runtimes load no file
/// so named, so they find plumb's conflist alone.
inline constexpr std::string_view kRenamedSuffix = ".old";

/// The node's primary CNI config in `conf_dir`, as a file name (not a path); nullopt when there is
/// none (or the directory is missing). With `name` empty: the lexically first file ending in
/// .conf, .conflist or .json (the names libcni loads) that is not plumb's own conflist, as
/// Multus's `auto` picks it; with `name` (--multus-master-cni-file-name): that file. `renamed`
/// is the original name of a primary an earlier pass renamed (renamed_primary()): it still counts
/// under that name, as `renamed` + kRenamedSuffix, unless a file of that name came back or (without
/// `name`) a config sorting before it appeared. Errors: kIo when the directory cannot be read.
[[nodiscard]] Result<std::optional<std::string>> primary_config(const std::string& conf_dir, const std::string& name = "",
                                                                const std::string& renamed = "");

/// The original name (without kRenamedSuffix) of the primary config plumb's conflist in
/// `conf_dir` names as its clusterNetwork when that is a renamed one still present in `conf_dir`;
/// nullopt otherwise (no conflist, not renamed, the renamed file gone).
[[nodiscard]] std::optional<std::string> renamed_primary(const std::string& conf_dir);

/// How the in-cluster API server is reached: the server URL client-go builds from the installing
/// pod's KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (source::kube::in_cluster), and its
/// service-account token and CA as read from their files.
struct ServiceAccount {
  std::string server;  ///< "https://host:port" (an IPv6 host in brackets)
  std::string token;   ///< the token file's content (trimmed)
  std::string ca_pem;  ///< the CA bundle file's content
};

/// Reads the service account in `sa_dir` (files `token` and `ca.crt`) for `host`/`port`;
/// nullopt when `host` is empty (not running in a cluster). Errors: kInvalidConfig when the port
/// is not a port number (in_cluster's); kIo/kNotFound naming the file that cannot be read;
/// kInvalidConfig when the token is empty.
[[nodiscard]] Result<std::optional<ServiceAccount>> read_service_account(const std::string& host, const std::string& port,
                                                                          const std::string& sa_dir);

/// The kubeconfig plumb uses on the node: one cluster (server https://host:port, the CA as
/// certificate-authority-data), one user with the token inline, one current context. YAML made
/// with libyaml's emitter (yaml::dump). Errors: kInternal when the token is not UTF-8.
[[nodiscard]] Result<std::string> render_kubeconfig(const ServiceAccount& sa);

/// Inputs of plumb's conflist.
struct ConflistInputs {
  std::string primary_path;       ///< the primary config as the host names it (clusterNetwork)
  std::string primary_text;       ///< its content (cniVersion and capabilities are taken from it)
  std::string kubeconfig_path;    ///< as the host names it; "" = no kubeconfig key
  std::string plugin_config;      ///< a JSON object of further keys for plumb's plugin entry; "" = none
  std::string plugin_type = "plumb";  ///< the plugin entry's type: "plumb", or "plumb-shim" in thick mode
  std::string cni_version;        ///< the cniVersion the primary must have (--cni-version); "" = any
  std::string node_name;          ///< the node's Kubernetes name (NODE_NAME from the downward API); "" = no nodeName key
};

/// plumb's conflist: {"cniVersion": <the primary's>, "name": "plumb", "plugins": [{"type":
/// <plugin_type>, "clusterNetwork": primary_path, "kubeconfig": ..., "capabilities": <every capability
/// the primary's plugins declare, plus io.kubernetes.cri.pod-annotations>, "nodeName": node_name
/// (when set: a runtime runs plumb without the DaemonSet's NODE_NAME), <plugin_config's keys>}]}, as Multus's auto configuration takes cniVersion and capabilities from its master
/// config. Errors: kInvalidConfig naming the primary file when it is not a JSON object, has no
/// supported cniVersion, another than `cni_version` (Multus's check of --cni-version) or a
/// capabilities member that is not an object of booleans; naming the key when plugin_config is
/// not a JSON object or sets type, clusterNetwork, kubeconfig, capabilities or nodeName.
[[nodiscard]] Result<std::string> render_conflist(const ConflistInputs& in);

}  // namespace plumb::install
