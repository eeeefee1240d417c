// Delegation (CNI SPEC "Execution protocol" and "Delegated plugins"): running a CNI plugin plumb
// does not implement — a plugin of a network's list, or the IPAM of one of plumb's own drivers —
// as libcni does: the binary found by its type in a list of directories, CNI_* in its
// environment, its config on stdin, its result or CNI error on stdout. One implementation for the
// orchestrator's chains (drivers/delegate.cpp) and delegated IPAM (ipam/delegated.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/base/spawn.hpp"
#include "engine/cni/cni.hpp"

namespace plumb::cni {

/// Where delegated plugins are found and how long one may run.
struct PluginSearch {
  std::vector<std::string> dirs;            ///< searched in order (plumb config binDir, then CNI_PATH)
  std::chrono::milliseconds timeout{60000};  ///< one plugin invocation, then its process group is killed
  /// The node's root as plumb sees it (plumb config chrootDir, Multus's key): plugins are found
  /// in `dirs` inside it and run chrooted to it, so they see the node's files and sockets; "" =
  /// plumb's own root.
  std::string root;
  /// The CNI_PATH a delegated plugin gets: dirs joined with ':' (as libcni passes its path).
  [[nodiscard]] std::string cni_path() const;
};

/// The search of one invocation: `bin_dir` first, then the entries of `cni_path` (the
/// runtime's CNI_PATH, ':'-separated), duplicates and empty entries dropped — Multus's order.
[[nodiscard]] PluginSearch make_search(const std::string& bin_dir, std::string_view cni_path,
                                       std::chrono::milliseconds timeout);

/// The executable of plugin `type`: the first "<dir>/<type>" that is an executable regular file
/// (looked up inside search.root when set; the path returned is the one inside it).
/// Errors: kInvalidConfig when `type` is not a plain file name; kNotFound "CNI plugin type \"t\"
/// not found in <dir>, <dir>" naming every directory searched.
[[nodiscard]] Result<std::string> find_plugin(std::string_view type, const PluginSearch& search);

/// The CNI parameters of one delegated call (SPEC "Parameters"); empty values are passed empty,
/// as libcni does for GC and STATUS.
struct Invocation {
  std::string command;       ///< "ADD", "DEL", "CHECK", "GC", "STATUS"
  std::string container_id;  ///< CNI_CONTAINERID
  std::string netns;         ///< CNI_NETNS
  std::string ifname;        ///< CNI_IFNAME (the attachment's interface name)
  std::string args;          ///< CNI_ARGS ("K=V;K=V")
};

/// The CNI_ARGS a delegated plugin gets, built as Multus builds them (CreateCNIRuntimeConf):
/// "IgnoreUnknown=true;K8S_POD_NAMESPACE=..;K8S_POD_NAME=..;K8S_POD_INFRA_CONTAINER_ID=..;
/// K8S_POD_UID=.." (values from the runtime's CNI_ARGS, empty when it has none), then the runtime's
/// other items in order. Without IgnoreUnknown the reference plugins refuse the K8S_* keys.
[[nodiscard]] std::string delegate_args(const std::vector<std::pair<std::string, std::string>>& runtime_args);

/// The environment a delegated plugin gets, as libcni's invoke.Args.AsEnv builds it: CNI_COMMAND,
/// CNI_CONTAINERID, CNI_NETNS, CNI_ARGS, CNI_IFNAME and CNI_PATH (`cni_path`) first, then every
/// entry of `base` (the caller's environment, "KEY=value" each, null-terminated array; may be
/// null) but those six, in its order. When `base` has no PATH, the FHS default is added (plugins
/// such as the reference portmap and firewall run iptables through it).
[[nodiscard]] std::vector<std::string> plugin_environment(const Invocation& inv, const std::string& cni_path,
                                                          const char* const* base);

/// Runs plugin `type` (executable `binary`) with `config` (JSON text) on stdin and the
/// environment plugin_environment() builds from this process's environment (`environ`: in thick
/// mode the daemon's, with the shim's CNI_* variables); no descriptor but 0-2. Chrooted to
/// search.root when set (CNI_NETNS, a path the runtime gave, is the node's: it resolves there as it
/// does for a plugin the runtime runs).
/// `on_started` is process::SpawnRequest's (write-ahead record of the child). Returns stdout as
/// JSON (a null document when the plugin printed nothing, as DEL/CHECK/GC/STATUS do).
/// Errors: the plugin's own CNI error with its code, "plugin <type> (<command>): <msg>" and its
/// details, stderr appended to the details; kDelegate for a plugin that exits non-zero without
/// a CNI error, is killed by a signal, or does not finish within search.timeout (killed), its
/// stderr in the message; kDecode when a successful plugin prints something that is not JSON.
[[nodiscard]] Result<json::Document> exec_plugin(std::string_view type, const std::string& binary, const Invocation& inv,
                                                 std::string_view config, const PluginSearch& search,
                                                 const std::function<Status(const process::Child&)>& on_started = {});

/// `conf` (a plugin config object) with "prevResult" set to `prev` encoded in `version`, or
/// removed when `prev` is null. Errors: encode_result's.
[[nodiscard]] Result<json::Document> with_prev_result(const json::Value& conf, const CniResult* prev, std::string_view version);

/// A delegated plugin's ADD output as a result: decoded in the cniVersion it names (else
/// `config_version`). Errors: kDecode naming the plugin type.
[[nodiscard]] Result<CniResult> decode_plugin_result(std::string_view type, const json::Value& out, std::string_view config_version);

}  // namespace plumb::cni
