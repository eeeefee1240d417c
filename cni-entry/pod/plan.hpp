// Planning a pod's ADD: every attachment (clusterNetwork, defaultNetworks, then the selection
// annotation's elements, NPWG v1.3 section 6.2) resolved, named and parsed — every plugin of every
// attachment through its driver's parse — before the first change to the node. A bad NAD, plugin
// type, key, capability or interface name anywhere in the pod fails here with nothing done.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/claims.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "cni-entry/source/source.hpp"
#include "drivers/driver.hpp"
#include "engine/cni/cni.hpp"
#include "engine/devinfo/devinfo.hpp"

namespace plumb::pod {

/// One planned attachment of the pod.
struct Attachment {
  int index = 0;                     ///< position in the pod (the default network is 0)
  bool is_default = false;
  std::string selection;             ///< "namespace/name" of the NAD; "" for a file-based default network
  std::string status_name;           ///< its network-status "name"
  std::string ifname;                ///< the pod-side interface name
  nad::ResolvedNetwork net;
  const nad::SelectionElement* element = nullptr;  ///< the selection element, null for default networks
  json::Document plugins;            ///< the plugin configs as run (runtimeConfig/args injected): recorded
  std::vector<drivers::ParsedPlugin> parsed;  ///< one per plugin, same order
  std::optional<claims::Use> claim;  ///< the IPAMClaim its addresses belong to (spec 8)
  devinfo::Plan device_info;         ///< its device-info file (spec 5.3.8); "" file = none
  std::string device_id;             ///< the device kubelet allocated for its resourceName (devices.hpp), "" if none
  /// CNI_ARGS items this attachment's plugins get at ADD after the runtime's: the
  /// default-network annotation's "mac" and "ips" as Multus passes them (MAC=, IP=a,b).
  drivers::CniArgs add_args;

  /// "network <selection or name> (<ifname>)", the prefix of every error about it.
  [[nodiscard]] std::string where() const;
};

/// A pod's plan. `elements` owns what Attachment::element points to.
struct PodPlan {
  std::vector<nad::SelectionElement> elements;
  std::vector<Attachment> attachments;
};

/// Plans every attachment of the pod (nothing here touches the kernel; claims write their GC
/// record). Errors: kInvalidConfig / kNotFound / kInvalidAnnotation naming the attachment, key and
/// value; the source's errors.
[[nodiscard]] Result<PodPlan> plan(const cni::Env& env, const PlumbConfig& conf, source::PodSource& store,
                                   const source::PodRef& pod, Log& log);

/// The settings of plumb's config that drivers' parse copies into their typed configs
/// (tuningAllowlist, bpffsDir).
[[nodiscard]] drivers::DriverSettings driver_settings(const PlumbConfig& conf);

/// Parses the plugins of one attachment (a JSON array of plugin configs: planned at ADD, or
/// recorded for CHECK); types plumb does not implement are delegated through `search`; the
/// cluster IPAM reaches the Kubernetes API through `cluster`; `settings` are plumb's per-driver
/// settings (driver_settings()).
/// Errors: the drivers' parse errors naming the network.
[[nodiscard]] Result<std::vector<drivers::ParsedPlugin>> parse_plugins(
    const json::Value& plugins, const std::string& network, const std::string& ifname, const drivers::CniArgs& cni_args,
    const cni::PluginSearch& search, const ipam::ClusterAccess& cluster = {},
    const drivers::DriverSettings& settings = {});

}  // namespace plumb::pod
