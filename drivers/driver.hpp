// Attachment kinds behind one table of operations (systemd-networkd's NetDevVTable idea): each
// kind lives in one file and is registered in drivers/registry.cpp. The orchestrator looks a
// plugin's "type" up with find() and never branches on kinds itself.
//
// A driver's life for one plugin of one attachment:
//   parse   plugin JSON -> the driver's typed config, validating every key with the reference
//           plugin's names and rules. No kernel, no files: the orchestrator parses every plugin
//           of every attachment of a pod before the first change, so a bad key anywhere fails
//           the ADD with nothing done.
//   add     typed config + the chain's previous result -> this plugin's result. Every kernel
//           change is a typed step (drivers/steps.hpp) whose executor records its inverse in
//           the typed undo journal (drivers/undo.hpp) before making it; drivers not moved to
//           steps yet announce it themselves with undo::will().
//   check   typed config + the recorded result: does the kernel still match (CNI CHECK)?
//   del     there is no per-driver DEL: DEL runs, newest first, the undo operations the ADD
//           recorded (drivers/undo.hpp), so it works from the state record alone.
// Drivers never call each other and never see JSON after parse. Steps several drivers share live
// in helper modules that are not drivers: common.cpp (every driver; declared below) and
// vf_attach.hpp (sriov, ib-sriov, vdpa).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/netns.hpp"
#include "engine/base/result.hpp"
#include "engine/cni/cni.hpp"
#include "engine/cni/delegate.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf_watch.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/state/journal.hpp"
#include "ipam/ipam.hpp"

namespace plumb::drivers {

namespace steps {
class Executor;
}

/// CNI_ARGS as (key, value) pairs, in order.
using CniArgs = std::vector<std::pair<std::string, std::string>>;

/// Settings of plumb's config that a driver's parse copies into its typed config (what its add
/// reads; paths only: parse reads no file).
struct DriverSettings {
  /// plumb config tuningAllowlist: the reference tuning plugin's sysctl allowlist (one regular
  /// expression a line; a missing file allows every net/ key)
  std::string tuning_allowlist = "/etc/cni/tuning/allowlist.conf";
  /// plumb config bpffsDir: the one plumb directory in bpffs, where bandwidth pins its shaping
  /// programs (ebpf/loader.hpp)
  std::string bpffs_dir = "/sys/fs/bpf/plumb";
};

/// What parse may use besides the plugin's JSON (nothing from the kernel or the disk).
struct ParseInput {
  std::string network;    ///< the network's CNI name: errors name keys as "<network>.<key>"
  std::string ifname;     ///< the attachment's pod-side interface name (tuning's IFNAME)
  CniArgs cni_args;       ///< CNI_ARGS (MAC=, IP=)
  /// Where plugins plumb does not implement are found (binDir, CNI_PATH); no directories: types
  /// plumb does not implement are refused.
  cni::PluginSearch plugin_search = {};
  /// How the cluster IPAM reaches whereabouts' pools in the Kubernetes API (plumb's credentials).
  ipam::ClusterAccess ipam_cluster = {};
  DriverSettings settings = {};
};

/// A plugin's "ipam", parsed once with the rest of its config. Drivers hand it to run_ipam()
/// and never look inside.
struct IpamUse {
  std::shared_ptr<ipam::Ipam> ipam;                  ///< null: the plugin has no ipam
  std::shared_ptr<const json::Document> conf;        ///< the "ipam" object (recorded for release)
  std::shared_ptr<const json::Document> runtime_config;  ///< the plugin's runtimeConfig (ips ...), may be null
  std::shared_ptr<const json::Document> args;        ///< the plugin's "args" (args.cni.ips ...), may be null
  /// A delegated IPAM (ipam::Ipam::delegated_type()) gets the whole plugin config on stdin (the
  /// CNI IPAM delegation protocol): kept here, null for plumb's own IPAMs.
  std::shared_ptr<const json::Document> network_config;
};

/// One plugin's parsed configuration. Each driver derives its own (BridgeConfig, ...); the
/// orchestrator holds it and hands it back to the driver that made it.
struct Config {
  virtual ~Config() = default;
  IpamUse ipam;  ///< the plugin's "ipam" (every driver may have one; most chained ones do not)
  cni::Dns dns;  ///< the plugin's "dns" key (CNI SPEC network configuration), empty when absent
};

/// The two ends of a veth pair plumb created for an attachment (create_pod_veth).
struct PodVeth {
  link::LinkInfo host;  ///< in the node namespace
  link::LinkInfo pod;   ///< in the pod namespace, named ctx.ifname
  /// No plugin of the chain has touched the host end's qdiscs yet (bandwidth clears it).
  bool qdiscs_untouched = true;
};

/// Everything a driver may touch for one plugin invocation of one attachment.
struct Context {
  std::string container_id;
  std::string ifname;                 ///< the pod-side interface name of this attachment
  std::string network;                ///< CNI network name
  std::string netns_path;             ///< CNI_NETNS ("" in a DEL whose namespace is gone)
  const netns::Netns* pod_ns = nullptr;   ///< open pod namespace; null when gone (DEL)
  netlink::Socket* node = nullptr;    ///< rtnetlink socket in the node namespace
  netlink::Socket* pod = nullptr;     ///< rtnetlink socket in the pod namespace; null when gone
  /// A warm process's facts about the node namespace (forwarding, gateway addresses), kept
  /// valid by notifications; null: every fact is asked of the kernel.
  netconf::Watch* node_watch = nullptr;
  CniArgs cni_args;
  /// ADD: every inverse is registered here before each change; a teardown (DEL, GC, rollback):
  /// the record undone, where what an undo operation starts is recorded while it runs; null
  /// when it cannot be (a record of the legacy layout).
  txn::Journal* journal = nullptr;
  /// What makes the drivers' steps (drivers/steps.hpp): null, the journal (write-ahead), one per
  /// step; an ADD's chain sets one steps::JournalExecutor for all its plugins (it keeps the veth
  /// pairs made for the later plugins); tests set a steps::RecordingExecutor.
  steps::Executor* executor = nullptr;
  std::string device_info_file;       ///< CNIDeviceInfoFile for this attachment, "" if none
  std::string sysfs_root = "/sys";    ///< plumb config sysfsRoot (ADD; VF undo operations record theirs)
  std::string state_dir;                        ///< plumb config stateDir (per-VF allocation records live under it)
  /// IPAMClaims (spec 8): the owner the IPAM holds this attachment's addresses for instead of
  /// container+ifname ("" = the container), and the claim's status.ips to re-use.
  std::string ipam_owner;
  std::vector<std::string> ipam_owner_ips;
  /// Where delegated plugins (types plumb does not implement) are found, and their time limit.
  cni::PluginSearch plugin_search;
  /// DEL/CHECK of a completed attachment: its recorded result (internal 1.1.0 shape), the
  /// prevResult delegated plugins get (libcni passes the list's cached result); else null.
  const json::Value* attachment_result = nullptr;
  /// How the cluster IPAM reaches whereabouts' pools in the Kubernetes API (release on DEL).
  ipam::ClusterAccess ipam_cluster;
};

/// One attachment kind or chained feature. See the file comment for the life of a plugin.
///   parse: errors are kInvalidConfig naming "<network>.<key>" and the value.
///   add:   `prev` is the previous plugin's result in the chain (null for the first); returns
///          this plugin's result in the internal (1.1.0) shape.
///   check: verifies from the kernel that the attachment is as `prev` says.
struct Driver {
  std::string_view type;
  Result<std::unique_ptr<Config>> (*parse)(const json::Value& conf, const ParseInput& in) = nullptr;
  Result<cni::CniResult> (*add)(Context& ctx, const Config& conf, const cni::CniResult* prev) = nullptr;
  Status (*check)(Context& ctx, const Config& conf, const cni::CniResult& prev) = nullptr;
};

/// Builds a Driver from a driver's typed functions (C derives from Config):
///   Result<C> parse(const json::Value&, const ParseInput&)
///   Result<cni::CniResult> add(Context&, const C&, const cni::CniResult* prev)
///   Status check(Context&, const C&, const cni::CniResult& prev)
/// The plugin's "ipam" is parsed here for every driver (parse_ipam).
template <class C, auto Parse, auto Add, auto Check>
constexpr Driver make_driver(std::string_view type);

/// The driver for a plugin "type", or nullptr if plumb does not implement it natively.
[[nodiscard]] const Driver* find(std::string_view type);
/// Types plumb implements, for messages.
[[nodiscard]] std::string known_types();

/// Parses a plugin's "ipam" (absent: an empty IpamUse); an IPAM type plumb does not implement is
/// delegated (found through in.plugin_search). Errors: the IPAM's (kInvalidConfig naming the
/// field); kNotFound naming a delegated IPAM type and the directories searched.
[[nodiscard]] Result<IpamUse> parse_ipam(const json::Value& conf, const ParseInput& in);
/// Parses a plugin's "dns" key ({nameservers, domain, search, options}, CNI SPEC network
/// configuration). Errors: kInvalidConfig naming "<network>.dns.<key>".
[[nodiscard]] Result<cni::Dns> parse_dns(const json::Value& conf, const std::string& network);
/// The reference plugins' two ways with the config's "dns": `always` (macvlan, ipvlan, vlan,
/// host-device, tap: result.DNS = conf.DNS) replaces the IPAM's DNS even when the config has
/// none; otherwise (bridge, ptp) only a non-empty config "dns" replaces it.
void apply_config_dns(cni::CniResult& r, const cni::Dns& dns, bool always);
/// One plugin of an attachment, parsed: its driver and its typed config.
struct ParsedPlugin {
  const Driver* driver = nullptr;
  std::unique_ptr<Config> config;
};
/// Parses one plugin of an attachment with its driver. Errors: kInvalidConfig naming an unknown
/// or missing "type"; the driver's parse errors.
[[nodiscard]] Result<ParsedPlugin> parse_plugin(const json::Value& conf, const ParseInput& in);

/// Runs the plugin's IPAM for this attachment (registering its release first, or only persisting
/// it when ipam_release_ahead() registered it). Returns an empty result when the plugin has no
/// ipam.
[[nodiscard]] Result<cni::CniResult> run_ipam(Context& ctx, const IpamUse& ipam, bool release_registered = false);
/// For a driver whose link is made just before its IPAM runs: registers the release of plumb's
/// own IPAM (host-local, static, cluster) to be persisted with the link's intent, one record
/// write for both (undo::will_later). Returns whether it did, for run_ipam(); false for no ipam
/// and for a delegated IPAM, which registers its own when it runs.
bool ipam_release_ahead(Context& ctx, const IpamUse& ipam);

/// Sets net.ipv4.conf.<ctx.ifname>.arp_notify = 1 on the pod interface `index` through ctx.pod,
/// over rtnetlink (link::LinkChange::arp_notify; not /proc/sys: engine/kernel/netconf.hpp says
/// why), so the link's coming up announces its MAC. Errors: the kernel's, naming the key.
[[nodiscard]] Status enable_arp_notify(Context& ctx, int index);

/// How long configure_pod_interface waits for duplicate address detection (the reference's
/// dadSettleTimeout).
inline constexpr std::chrono::milliseconds kDadSettleTimeout{5000};

/// Sets arp_notify with `arp_notify` (enable_arp_notify; before the link comes up when there is
/// an IPv4 address to announce), adds the result's addresses (IPv6 with IFA_F_NODAD unless dad
/// and the kernel does duplicate address detection on the link, addr::dad_skipped;
/// IPv6 enabled on lo and the interface where the namespace has it disabled), brings the link
/// up, waits with `dad` and an IPv6 gateway until no IPv6 address is tentative (addr::settle, up
/// to kDadSettleTimeout), and adds the result's routes (gateway-less routes get the gateway of
/// their family from ips) on the pod interface `index` through ctx.pod. The reference plugins'
/// ipam.ConfigureIface.
/// Errors: the kernel's, naming the address or route; addr::settle's (a duplicate address:
/// EADDRNOTAVAIL naming it); the sysctl's naming the key.
[[nodiscard]] Status configure_pod_interface(Context& ctx, int index, const cni::CniResult& r, bool dad,
                                             bool arp_notify = false);

/// Makes `r` the result of a driver whose only interface is the pod's `pod_link` (ctx.ifname in
/// ctx.netns_path): interfaces = [it], every IP on interface 0; then configure_pod_interface
/// (addresses, up, routes; IPv6 with DAD; arp_notify with `arp_notify`), deciding whether the
/// kernel skips DAD from `pod_link` itself (addr::dad_skipped: no look-up of the link).
/// Errors: configure_pod_interface's.
[[nodiscard]] Status finish_pod_interface(Context& ctx, const link::LinkInfo& pod_link, cni::CniResult& r,
                                          bool arp_notify = false);
/// Announces the result's addresses on pod interface `index` (MAC `mac`) once it is up:
/// engine/kernel/announce.hpp's gratuitous ARP per IPv4 address and, with `ipv6`, unsolicited
/// Neighbor Advertisement per IPv6 address, after waiting up to `carrier_wait` for carrier (as
/// sriov-cni waits 200 ms; 0 = no wait). Best effort, as in sriov-cni and the reference macvlan: a
/// failure changes nothing and is not reported (announcing only speeds up neighbours' learning).
void announce_addresses(Context& ctx, int index, const Mac& mac, const cni::CniResult& r,
                        std::chrono::milliseconds carrier_wait, bool ipv6);

/// The MAC the pod interface must get, from (lowest to highest priority) the config's "mac",
/// CNI_ARGS MAC=, args.cni.mac and runtimeConfig.mac (the "mac" capability), as the reference
/// plugins resolve it. nullopt when none is given. Errors: kInvalidConfig naming the value.
[[nodiscard]] Result<std::optional<Mac>> requested_mac(const json::Value& conf, const ParseInput& in);

/// An "mtu" key of object `obj` (the plugin config, or args.cni): absent or 0 = nullopt; else
/// 68..65535 bytes (68: the smallest MTU the kernel gives an Ethernet device, IPv4's minimum).
/// The one MTU rule of every driver. `where` prefixes the key in errors.
/// Errors: kInvalidConfig "<where>.mtu <value> is out of range (68..65535)".
[[nodiscard]] Result<std::optional<uint32_t>> parse_mtu(const json::Value& obj, std::string_view where,
                                                         std::string_view key = "mtu");

/// ipMasqBackend (bridge, ptp): absent, "iptables" or "nftables", as the reference's ipmasq
/// refuses any other backend; plumb masquerades through nftables either way.
/// Errors: kInvalidConfig "<where>.ipMasqBackend \"x\" must be \"iptables\" or \"nftables\"".
[[nodiscard]] Status check_ipmasq_backend(const json::Value& conf, const std::string& where);

/// ipMasq (bridge, ptp): traffic from every address of `r` leaving the node is masqueraded,
/// except towards the network's own subnets (all of r's, dual stack) and multicast; each address
/// registers its "masq_del" undo first. Errors: engine/nft/nft.hpp add_masquerade's.
[[nodiscard]] Status masquerade_addresses(Context& ctx, const cni::CniResult& r);

/// A random interface name "<prefix><8 hex digits>" (host ends of veth pairs, temporary names).
[[nodiscard]] std::string random_ifname(std::string_view prefix);

/// The veth pair of a pod's attachment (bridge, ptp): the pod end born in the pod namespace under
/// ctx.ifname, the host end under a random "veth" name (another one on a name collision, up to 5
/// tries), each try's deletion registered before it. `spec` gives the rest (MTU, MACs, group,
/// master, up); its names and peer namespace are set here. Returns both ends: the host end as the
/// kernel echoed it (else read back), the pod end read back (steps::CreatePodVeth; ctx.executor
/// keeps them for the chain's later plugins).
/// Errors: kConflict when ctx.ifname exists in the pod; the kernel's, naming the pair and the
/// namespace.
[[nodiscard]] Result<PodVeth> create_pod_veth(Context& ctx, link::VethSpec spec);

// --- shared CHECK helpers (every driver that creates a pod interface) ---------------------------

/// The pod interface ctx.ifname must exist, be up, be of `kind` (when not ""), and have the MAC
/// and MTU `prev` reports for it. Returns it. Errors: kKernel "CHECK: ..." naming what differs.
[[nodiscard]] Result<link::LinkInfo> check_pod_interface(Context& ctx, const cni::CniResult& prev, std::string_view kind);
/// Every address of prev.ips is on the pod interface `index`. Errors: kKernel naming the address.
[[nodiscard]] Status check_pod_addresses(Context& ctx, int index, const cni::CniResult& prev);
/// Every route of prev.routes is in the pod namespace (in any routing table: a chained vrf moves
/// them to its own). Errors: kKernel naming the route.
[[nodiscard]] Status check_pod_routes(Context& ctx, const cni::CniResult& prev);

// --- implementation of make_driver ---------------------------------------------------------------

template <class C, auto Parse, auto Add, auto Check>
constexpr Driver make_driver(std::string_view type) {
  Driver d;
  d.type = type;
  d.parse = [](const json::Value& conf, const ParseInput& in) -> Result<std::unique_ptr<Config>> {
    auto typed = std::make_unique<C>(PLUMB_TRY(Parse(conf, in)));
    typed->ipam = PLUMB_TRY(parse_ipam(conf, in));
    typed->dns = PLUMB_TRY(parse_dns(conf, in.network));
    return std::unique_ptr<Config>(std::move(typed));
  };
  d.add = [](Context& ctx, const Config& conf, const cni::CniResult* prev) -> Result<cni::CniResult> {
    return Add(ctx, static_cast<const C&>(conf), prev);
  };
  d.check = [](Context& ctx, const Config& conf, const cni::CniResult& prev) -> Status {
    return Check(ctx, static_cast<const C&>(conf), prev);
  };
  return d;
}

}  // namespace plumb::drivers
