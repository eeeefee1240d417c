// Attachment kinds behind one table of operations (systemd-networkd's NetDevVTable idea): each
// kind lives in one file and is registered in drivers/registry.cpp. The engine looks a plugin's
// "type" up with find() and never branches on kinds itself.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/cni/cni.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/kernel/netns.hpp"
#include "engine/state/journal.hpp"

namespace plumb::drivers {

/// Everything a driver may touch for one plugin invocation of one attachment.
struct Context {
  std::string container_id;
  std::string ifname;                 // the pod-side interface name of this attachment
  std::string network;                // CNI network name
  std::string netns_path;             // CNI_NETNS ("" in a DEL whose namespace is gone)
  const netns::Netns* pod_ns = nullptr;   // open pod namespace; null when gone (DEL)
  netlink::Socket* node = nullptr;    // rtnetlink socket in the node namespace
  netlink::Socket* pod = nullptr;     // rtnetlink socket in the pod namespace; null when gone
  std::vector<std::pair<std::string, std::string>> cni_args;
  txn::Journal* journal = nullptr;    // ADD: register every inverse here before each change
  std::string device_info_file;       // CNIDeviceInfoFile for this attachment, "" if none
  std::string sysfs_root = "/sys";    // plumb config sysfsRoot: fake trees in tests
  std::string bpffs_dir = "/sys/fs/bpf/plumb";  // plumb config bpffsDir: node-wide BPF pins (ebpf/loader.hpp)
  std::string state_dir;              // plumb config stateDir (per-VF allocation records live under it)
};

/// One attachment kind or chained feature.
///   add:   conf is the plugin's JSON (cniVersion/name injected, runtimeConfig and args as
///          delivered), prev the previous plugin's result in the chain (null for the first).
///          Returns the plugin's result in the internal (1.1.0) shape. Every kernel change is
///          preceded by ctx.journal->will(inverse). Errors: CNI errors naming field and value.
///   check: verifies from the kernel that the attachment is as `prev` says (CNI CHECK).
///   undo:  executes this driver's own undo operations, those whose "op" is "<type>.<name>"
///          (e.g. "sriov.restore_vf"); nullptr if the driver only uses the shared operations.
///          Must be idempotent: a missing object is success.
struct Driver {
  std::string_view type;
  Result<cni::CniResult> (*add)(Context& ctx, const json::Value& conf, const cni::CniResult* prev);
  Status (*check)(Context& ctx, const json::Value& conf, const cni::CniResult& prev);
  Status (*undo)(Context& ctx, const json::Value& op) = nullptr;
};

/// The driver for a plugin "type", or nullptr if plumb does not implement it natively.
[[nodiscard]] const Driver* find(std::string_view type);
/// Types plumb implements, for messages.
[[nodiscard]] std::string known_types();

/// Executes one undo operation: the shared ones below (common.cpp), or "<type>.<name>" through
/// that driver's undo. Missing
/// objects (link already gone, address already released) are success: undo is idempotent.
[[nodiscard]] Status run_undo(Context& ctx, const json::Value& op);

/// Undo operation builders (the JSON recorded in the journal).
namespace undo {
/// Delete link `name` in the node ("node") or pod ("pod") namespace.
[[nodiscard]] json::Document link_del(std::string_view where, const std::string& name);
/// Delete bridge `name` in the node namespace if it has no ports left (rollback only).
[[nodiscard]] json::Document bridge_del_if_unused(const std::string& name);
/// Release the IPAM allocation of this container+ifname; `ipam` is the config's ipam object.
[[nodiscard]] json::Document ipam_release(const json::Value& ipam, const std::string& network, const std::string& ifname);
/// Remove the masquerade element of `pod_ip` from plumb's nftables table.
[[nodiscard]] json::Document masq_del(const std::string& pod_ip);
}  // namespace undo

/// Adds the result's addresses (IPv6 with IFA_F_NODAD unless dad), brings the link up and adds
/// the result's routes (gateway-less routes get the gateway of their family from ips) on the
/// pod interface `index` through ctx.pod. The reference plugins' ipam.ConfigureIface.
[[nodiscard]] Status configure_pod_interface(netlink::Socket& pod, int index, const cni::CniResult& r, bool dad);

/// Runs the "ipam" of `conf` for this attachment (registering its release in the journal first).
/// Returns an empty result when conf has no ipam.
[[nodiscard]] Result<cni::CniResult> run_ipam(Context& ctx, const json::Value& conf);

/// The MAC the pod interface must get, from (lowest to highest priority) the config's "mac",
/// CNI_ARGS MAC=, args.cni.mac and runtimeConfig.mac (the "mac" capability), as the reference
/// plugins resolve it. nullopt when none is given. Errors: kInvalidConfig naming the value.
[[nodiscard]] Result<std::optional<Mac>> requested_mac(const Context& ctx, const json::Value& conf);

/// A random interface name "<prefix><8 hex digits>" (host ends of veth pairs, temporary names).
[[nodiscard]] std::string random_ifname(std::string_view prefix);

}  // namespace plumb::drivers
