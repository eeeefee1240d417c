// plumb's own configuration: the "type": "plumb" plugin entry of the node's conflist.
// Key names follow Multus where Multus has the concept.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cni-entry/pod/log.hpp"
#include "cni-entry/source/kubelet.hpp"
#include "cni-entry/source/source.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/cni/delegate.hpp"
#include "engine/k8s/client.hpp"
#include "ipam/ipam.hpp"

namespace plumb::pod {

/// Parsed and validated plumb configuration plus what the runtime delivered with it.
struct PlumbConfig {
  std::string cni_version;              // the config's cniVersion (results are given in it)
  std::string name;                     // the runtime-facing network name
  std::string cluster_network;          // NAD name ("name" or "ns/name"), or a conf/conflist file or directory path
  std::vector<std::string> default_networks;  // NAD names attached to every pod after clusterNetwork
  std::string multus_namespace = "kube-system";  // namespace of clusterNetwork/defaultNetworks NADs
  bool namespace_isolation = false;     // pods may only use NADs of their namespace, "default" and globalNamespaces
  std::vector<std::string> global_namespaces;
  std::vector<std::string> system_namespaces = {"kube-system"};  // no network-status written for pods here
  std::string store_dir = "/etc/plumb/store";
  std::string state_dir = "/var/lib/cni/plumb";
  std::string conf_dir = "/etc/cni/multus/net.d";  // on-disk configs for NADs without spec.config (3.4.1)
  bool strict_annotations = false;      // an invalid selection annotation fails the ADD instead of being ignored
  std::string sysfs_root = "/sys";      // where device lookups read sysfs (host-device, SR-IOV, vDPA)
  std::string device_info_dir = "/var/run/k8s.cni.cncf.io/devinfo";  // device-info spec base dir (dp/, cni/)
  std::string bpffs_dir = "/sys/fs/bpf/plumb";  // bpffsDir: the one plumb directory in bpffs (bandwidth pins)
  std::string tuning_allowlist = "/etc/cni/tuning/allowlist.conf";  // tuningAllowlist: the tuning plugin's sysctl allowlist
  std::string log_file;                 // "" = stderr only
  std::string log_level = "warning";    // error, warning, info, debug; Multus's panic (= error) and verbose (= info)
  bool log_to_stderr = true;            // logToStderr (Multus): false = the log file only
  // The Kubernetes API server (cni-entry/source/kube.hpp). Without kubeconfig and without
  // KUBERNETES_SERVICE_HOST in the environment, pods/NADs/IPAMClaims come from storeDir.
  std::string kubeconfig;               // Multus's key: kubeconfig file path ("" = none)
  double api_timeout_seconds = 30;      // apiTimeoutSeconds: one request attempt, connect included
  int api_retries = 3;                  // apiRetries: extra attempts after transient errors (backoff 0.5 s doubling, max 4 s)
  bool status_errors_fatal = false;     // statusErrorsFatal: a failed network-status write fails (and undoes) the ADD
  bool status_after_answer = false;     // statusAfterAnswer: a daemon worker writes network-status on the API
                                        // server after the runtime's answer (exec'd plumb: ignored)
  std::string node_name;                // nodeName: the node's Kubernetes name when NODE_NAME is not set ("" = none)
  std::string whereabouts_namespace;    // whereaboutsNamespace: where whereabouts' IPPools live ("" = the
                                        // kubeconfig context's namespace, else kube-system, as whereabouts)
  // kubelet's pod-resources API (cni-entry/source/kubelet.hpp): device IDs of NADs with resourceName.
  std::string pod_resources_socket = source::kDefaultPodResourcesSocket;  // podResourcesSocket
  double pod_resources_timeout_seconds = 10;  // podResourcesTimeoutSeconds: the whole lookup (Multus: 10 s)
  // Multus's keys for delegation and readiness (config_multus.cpp).
  std::string bin_dir = "/opt/cni/bin";  // binDir: searched first for plugins plumb delegates to, then CNI_PATH
  double delegate_timeout_seconds = 60;  // delegateTimeoutSeconds: one delegated plugin call, then it is killed
  // chrootDir (Multus's daemon key): the node's root as a `plumb daemon` in a container sees it
  // (the thick DaemonSet mounts it at /hostroot); delegated plugins run chrooted to it. An
  // exec'd plumb runs in the node's root already: main.cpp clears it outside the daemon.
  std::string chroot_dir;
  json::Document delegates;              // delegates (Multus): CNI configs, the first the default network; null = none
  std::string readiness_indicator_file;  // readinessindicatorfile: ADD waits for it, then fails
  double readiness_timeout_seconds = 45;  // readinessTimeoutSeconds: how long (Multus: 45 s, polled every second)
  bool retry_delete_on_error = false;    // retryDeleteOnError: accepted; plumb always keeps what a failed DEL left
  std::string auxiliary_chain_name;      // auxiliaryCNIChainName (Multus): a chain of the clusterNetwork directory's drop-ins, "" = none
  LogRotation log_rotation;              // logOptions (Multus): how logFile is rotated, Multus's defaults without it
  // multusCacheDir: Multus's cniDir on a node adopted from Multus (multus_adopt.hpp): a DEL or GC
  // of a sandbox plumb has no record of tears down what Multus's cache there describes; "" = none.
  std::string multus_cache_dir = "/var/lib/cni/multus";

  json::Document runtime_config;        // canonicalised runtimeConfig (object, possibly empty)
  std::optional<std::map<std::string, std::string>> pod_annotations;  // io.kubernetes.cri.pod-annotations
  json::Document prev_result;           // CHECK/DEL prevResult (null if absent)
  std::vector<std::pair<std::string, std::string>> valid_attachments;  // GC: (containerID, ifname)
};

/// Parses plumb's config from the runtime's stdin. Unknown keys are ignored; a "capabilities"
/// key (podman) is tolerated. Errors: kDecode for bad JSON; kInvalidConfig naming the key and
/// value; kIncompatibleVersion for an unsupported cniVersion.
[[nodiscard]] Result<PlumbConfig> parse_config(std::string_view text);

/// Multus's keys besides those parse_config reads itself (config_multus.cpp): binDir, cniDir
/// (stateDir's Multus name), delegates, readinessindicatorfile, logToStderr, retryDeleteOnError,
/// chrootDir (an absolute path), auxiliaryCNIChainName and logOptions; plus plumb's delegateTimeoutSeconds,
/// readinessTimeoutSeconds and multusCacheDir (an absolute path or ""). Errors: kInvalidConfig naming the key and
/// value.
[[nodiscard]] Status parse_multus_keys(const json::Value& d, PlumbConfig& c);

/// The API request options plumb's config asks for (apiTimeoutSeconds, apiRetries).
[[nodiscard]] k8s::Options api_options(const PlumbConfig& conf);

/// How the cluster IPAM reaches whereabouts' pools in the Kubernetes API: plumb's kubeconfig (or
/// in-cluster service account), its API options and whereaboutsNamespace.
[[nodiscard]] ipam::ClusterAccess ipam_cluster(const PlumbConfig& conf);

/// Where plugins plumb delegates to are found for this invocation: binDir, then CNI_PATH.
[[nodiscard]] cni::PluginSearch plugin_search(const PlumbConfig& conf, const std::string& cni_path_env);

/// The source plumb's config asks for: the Kubernetes API server when `kubeconfig` is set or,
/// without it, when KUBERNETES_SERVICE_HOST is in the environment (in-cluster service account,
/// see kube.hpp); else the local store at storeDir. Only reads local files (kubeconfig), never
/// the network. Errors: kInvalidConfig naming the kubeconfig file and the offending field.
[[nodiscard]] Result<std::unique_ptr<source::PodSource>> make_source(const PlumbConfig& conf);

}  // namespace plumb::pod
