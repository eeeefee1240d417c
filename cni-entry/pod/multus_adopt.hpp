// Adopting a node from Multus: the sandboxes Multus attached before plumb replaced it, torn down
// from Multus's own caches as Multus's DEL would (multus.go CmdDel / delPlugins, libcni's
// DelNetworkList). Multus keeps, under its cniDir (default /var/lib/cni/multus):
//   <cniDir>/<containerID>               the pod's delegates, a JSON array of types.DelegateNetConf
//                                        (saveDelegates): "Name", "Conf", "ConfList", "ifnameRequest",
//                                        "macRequest", "infinibandGUIDRequest", "ipRequest",
//                                        "deviceID", "resourceName", "Bytes" (the config it ran,
//                                        base64 as Go encodes a []byte)
//   <cniDir>/results/<net>-<cid>-<ifname> libcni's result cache (Multus hands libcni its cniDir as
//                                        the cache directory): {"kind":"cniCacheV1","containerId",
//                                        "ifName","networkName","netns","cniArgs","capabilityArgs",
//                                        "config","result"}
// Each delegate's plugins are executed (never plumb's drivers: the state is theirs — iptables
// chains, sriov-cni's saved VF settings, IPAM files — and only they know how to undo it), last
// delegate first, each chain's plugins in reverse, with the cached result as prevResult.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/cni/cni.hpp"

namespace plumb::pod::multus {

/// One delegate of Multus's cache, as Multus's DEL sees it.
struct Delegate {
  std::string name;         ///< "Name" (the device-info file is named after it)
  std::string ifname;       ///< Multus's getIfname: ifnameRequest, the runtime's for the first, else "net<index>"
  bool conflist = false;    ///< ConfList.plugins is not empty
  json::Document config;    ///< "Bytes": the conf or conflist Multus ran (cniVersion filled in as CmdDel does)
  json::Document requests;  ///< capability args the selection element asked for (non-first delegates): ips, mac,
                            ///< infinibandGUID, deviceID
  std::string device_id;    ///< "deviceID", "" if none
};

/// Reads <dir>/<container_id>: nullopt when it does not exist. `master_ifname` is the
/// CNI_IFNAME of the first delegate; `cni_version` the version CmdDel gives a conflist without
/// one (the DEL's config). Errors: kIo reading; kDecode for a file that is not Multus's
/// delegate list (naming the file and the entry).
[[nodiscard]] Result<std::optional<std::vector<Delegate>>> read_delegates(const std::string& dir,
                                                                          const std::string& container_id,
                                                                          const std::string& master_ifname,
                                                                          const std::string& cni_version);

/// The sandbox a teardown is for: what Multus's DEL got from the runtime (or, in GC, from
/// libcni's cache).
struct Sandbox {
  std::string container_id;
  std::string netns;              ///< "" when unknown (GC of a sandbox whose namespace is gone)
  std::string cni_args;           ///< CNI_ARGS the delegates get ("K=V;K=V", cni::delegate_args)
  json::Document runtime_config;  ///< the runtime's runtimeConfig (capability args every delegate starts from)
};

/// Multus's delPlugins: every delegate's DEL, last first, each with its cached result (libcni's
/// cache under `dir`/results, removed when the delegate's DEL succeeded) and its device-info
/// file removed. Every delegate is tried; errors go to `errors`.
void del_delegates(const PlumbConfig& conf, const std::string& dir, const std::string& cni_path, const Sandbox& sb,
                   const std::vector<Delegate>& delegates, Log& log, Errors& errors);

/// DEL of a sandbox plumb has no record of: when Multus's cache under conf.multus_cache_dir
/// names it, tears it down (del_delegates) and removes the cache file once every delegate's DEL
/// succeeded (kept otherwise, so the runtime's next DEL finishes). Returns whether Multus's cache
/// had the sandbox. Errors: the delegates' DEL errors, joined.
[[nodiscard]] Result<bool> del(const cni::Env& env, const PlumbConfig& conf, Log& log);

/// GC: each sandbox of Multus's cache whose container ID cni.dev/valid-attachments does not list
/// is torn down like del(), its netns, CNI_ARGS and first interface name taken from libcni's
/// result cache (the first interface "eth0" when that is gone). Errors go to `errors`.
void gc(const cni::Env& env, const PlumbConfig& conf, Log& log, Errors& errors);

}  // namespace plumb::pod::multus
