// The typed undo journal: every kernel or file change an ADD makes is announced first, as one of
// the operations below, in the attachment's state record (write-ahead; engine/state/journal.hpp
// persists it). A failed ADD, a DEL and a GC run the recorded operations newest first.
//
// One definition per operation kind (a struct listing its fields once, in fields()), one writer
// (encode), one reader (decode), one dispatch (run). The JSON names are those of records written
// since plumb's first release, so records of older binaries decode unchanged:
//
//   {"op": "link_del", "where": "node"|"pod", "name": "veth1a2b3c4d"}
//   {"op": "sriov.release", "pci": "0000:03:00.2", "container_id": ..., "ifname": ...}
//   ... (one struct per "op" below; the VF operations are named "<driver>.<verb>")
//
// Every operation is idempotent: a missing object (link gone, address released) is success.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "drivers/driver.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/vf.hpp"
#include "engine/nft/portmap.hpp"

namespace plumb::drivers::undo {

/// Delete link `name` in the node ("node") or pod ("pod") namespace; with `group`, only a link of
/// that link group (a name plumb did not draw at random, e.g. the attachment's own: the link
/// holding it may be someone else's, and one plumb created is born in link::kPodLinkGroup).
/// Records without "group" (every plumb before it) delete by name.
struct LinkDel {
  static constexpr std::string_view kName = "link_del";
  std::string where;  ///< "node" or "pod"
  std::string name;
  std::optional<uint32_t> group;
  template <class V> void fields(V& v) { v("where", where); v("name", name); v("group", group); }
};

/// Delete bridge `name` in the node namespace if it has no ports left (rollback only).
struct BridgeDelIfUnused {
  static constexpr std::string_view kName = "bridge_del_if_unused";
  std::string name;
  template <class V> void fields(V& v) { v("name", name); }
};

/// Release what the IPAM holds for (container, ifname) in `network`; `ipam` is the plugin's
/// "ipam" object as it was run.
struct IpamRelease {
  static constexpr std::string_view kName = "ipam_release";
  json::Document ipam;
  std::string network;
  std::string ifname;
  template <class V> void fields(V& v) { v("ipam", ipam); v("network", network); v("ifname", ifname); }
};

/// Remove the masquerade element of pod address `ip` from plumb's nftables table.
struct MasqDel {
  static constexpr std::string_view kName = "masq_del";
  IpAddr ip;
  template <class V> void fields(V& v) { v("ip", ip); }
};

/// Remove the attachment's device-info file (spec 5.3.8).
struct DevinfoRemove {
  static constexpr std::string_view kName = "devinfo_remove";
  std::string path;
  template <class V> void fields(V& v) { v("path", path); }
};

/// tuning: put back the pod namespace's sysctls and the interface's attributes it changed.
struct TuningRestore {
  static constexpr std::string_view kName = "tuning.restore";
  std::string ifname;
  std::map<std::string, std::string> sysctl;  ///< '/' key under /proc/sys -> previous value
  std::optional<Mac> mac;
  std::optional<uint32_t> mtu_bytes;
  std::optional<bool> promisc;
  std::optional<bool> allmulti;
  std::optional<uint32_t> txqlen;
  template <class V> void fields(V& v) {
    v("ifname", ifname); v("sysctl", sysctl); v("mac", mac); v("mtu", mtu_bytes); v("promisc", promisc);
    v("allmulti", allmulti); v("txQLen", txqlen);
  }
};

/// host-device: the device back to the node under its name, MTU and MAC.
struct HostDeviceRestore {
  static constexpr std::string_view kName = "host-device.restore";
  std::string name;    ///< its name in the node before the ADD
  std::string ifname;  ///< its name in the pod
  int index = 0;       ///< its ifindex (kept across namespaces for physical devices)
  uint32_t mtu_bytes = 0;
  std::optional<Mac> mac;
  template <class V> void fields(V& v) { v("name", name); v("ifname", ifname); v("index", index); v("mtu", mtu_bytes); v("mac", mac); }
};

/// portmap: the pod's mappings and SNAT entries out of plumb's nftables maps. The mappings as the
/// engine takes them (their condition classes' expressions are not needed to remove them).
/// JSON: {"containerID", "ifname", "mappings": [{"protocol": "tcp"|"udp"|"sctp", "hostIP"?,
/// "hostPort", "podIP", "containerPort", "conditions"?}], "snat": [address], "masqAll": [address]}.
struct PortmapRemove {
  static constexpr std::string_view kName = "portmap.remove";
  nft::PodPortMappings pm;
  template <class V> void fields(V& v) {
    v("containerID", pm.container_id);
    v("ifname", pm.ifname);
    v("mappings", pm.mappings);
    v("snat", pm.snat_pods);
    v("masqAll", pm.masq_all_pods);
  }
};

/// bandwidth: plumb's filters, clsact/fq it added and the pod's map entries off the shaped device
/// (the host side of the pod's veth, or the pod-side interface).
struct BandwidthRemove {
  static constexpr std::string_view kName = "bandwidth.remove";
  std::string bpffs_dir;
  std::string host;         ///< host-side device name
  int ifindex = 0;
  uint64_t owner = 0;       ///< the owner tag of the map entries
  std::vector<std::string> hooks;  ///< ebpf::hook_name() of each attached hook
  bool clsact = false;      ///< plumb added the clsact qdisc
  bool fq = false;          ///< plumb replaced the root qdisc with fq
  std::optional<bool> pod;  ///< shaped on the pod-side interface (host/ifindex are then the pod's)
  std::optional<uint32_t> classid;  ///< pod side: the filters' classid, the entries' key
  std::optional<uint32_t> abi;      ///< PLUMB_BW_ABI_VERSION of the pins (absent: written before ABI 2)
  /// The pin directory holding the entries, as opened at ADD (absent: written before it was
  /// recorded; then <bpffsDir>/bandwidth_v<abi>): a plumb of another ABI finds them there.
  std::optional<std::string> pins;
  template <class V> void fields(V& v) {
    v("bpffsDir", bpffs_dir); v("host", host); v("ifindex", ifindex); v("owner", owner); v("hooks", hooks); v("clsact", clsact);
    v("fq", fq); v("pod", pod); v("classid", classid); v("abi", abi); v("pins", pins);
  }
};

/// sbr: its source rules out of the pod namespace, its routing tables emptied, the routes it
/// took out of the main table put back. JSON "mainRoutes": [{"dst", "gw"?, "prefsrc"?, "oif",
/// "table", "priority", "scope", "protocol", "type"}] (route::Route's fields).
struct SbrRestore {
  static constexpr std::string_view kName = "sbr.restore";
  std::vector<std::string> rules;         ///< "<src>/<len> <table>" of each rule added
  std::vector<uint32_t> tables;           ///< tables sbr filled (emptied)
  std::vector<route::Route> main_routes;  ///< routes removed from the main table
  template <class V> void fields(V& v) { v("rules", rules); v("tables", tables); v("mainRoutes", main_routes); }
};

/// firewall: the attachment's addresses out of plumb's firewall sets (only elements it owns).
struct FirewallRemove {
  static constexpr std::string_view kName = "firewall.remove";
  std::string container_id;
  std::string ifname;
  std::vector<IpAddr> addresses;
  std::string admin_chain;
  template <class V> void fields(V& v) {
    v("containerID", container_id); v("ifname", ifname); v("addresses", addresses); v("adminChain", admin_chain);
  }
};

/// vrf: take pod interface `ifname` out of VRF `vrf` (when still in it), then delete the VRF once
/// nothing is enslaved to it.
struct VrfRelease {
  static constexpr std::string_view kName = "vrf.release";
  std::string vrf;
  std::string ifname;
  template <class V> void fields(V& v) { v("vrf", vrf); v("ifname", ifname); }
};

/// bridge macspoofchk: the port . MAC elements out of plumb's bridge table.
struct MacspoofDel {
  static constexpr std::string_view kName = "bridge.macspoof_del";
  std::string port;  ///< host end of the pod's veth
  Mac mac;           ///< the pod's MAC
  template <class V> void fields(V& v) { v("port", port); v("mac", mac); }
};

/// Delete address `prefix` from link `ifname` in the node (bridge: the gateway address an ADD
/// added; rollback only, as the bridge is shared). With `bridge`, the address is kept while that
/// bridge has a port other than `port` (the attachment's own): another attachment relies on the
/// gateway (an ADD rolled back while another ADD on the bridge runs). A missing link or address is
/// success.
struct AddrDel {
  static constexpr std::string_view kName = "addr_del";
  static constexpr bool kSkipIfUnknown = true;  ///< depends on nothing recorded before it
  std::string ifname;
  IpPrefix prefix;
  std::optional<std::string> bridge = std::nullopt;
  std::optional<std::string> port = std::nullopt;
  template <class V>
  void fields(V& v) {
    v("ifname", ifname);
    v("prefix", prefix);
    v("bridge", bridge);
    v("port", port);
  }
};

/// Put address `prefix` back on link `ifname` in the node (bridge forceAddress: the address an ADD
/// removed; rollback only). A missing link, or the address already there, is success.
struct AddrRestore {
  static constexpr std::string_view kName = "addr_restore";
  static constexpr bool kSkipIfUnknown = true;
  std::string ifname;
  IpPrefix prefix;
  template <class V>
  void fields(V& v) {
    v("ifname", ifname);
    v("prefix", prefix);
  }
};

/// Put node sysctl `key` ('/' separated under /proc/sys) back to `value` (portmap's
/// route_localnet on the attachment's host-side interfaces; rollback only). A key that no longer
/// exists (its interface is gone) is success.
struct SysctlRestore {
  static constexpr std::string_view kName = "sysctl_restore";
  static constexpr bool kSkipIfUnknown = true;
  std::string key;
  std::string value;
  template <class V>
  void fields(V& v) {
    v("key", key);
    v("value", value);
  }
};

/// firewall ingressPolicy same-bridge or isolated: the attachment's claim on bridge `bridge` out of
/// plumb's firewall sets, and the bridge out of the isolation sets no other attachment claims.
struct FirewallReleaseBridge {
  static constexpr std::string_view kName = "firewall.release_bridge";
  static constexpr bool kSkipIfUnknown = true;  ///< an older plumb leaves the isolation, as before
  std::string bridge;
  bool isolated = false;
  std::string container_id;
  std::string ifname;
  template <class V>
  void fields(V& v) {
    v("bridge", bridge);
    v("isolated", isolated);
    v("containerID", container_id);
    v("ifname", ifname);
  }
};

/// The fields every VF operation carries: which driver and whose VF. The operation runs only
/// while the VF's allocation record names this container and interface (a VF reclaimed by
/// another pod is left alone).
struct VfOwner {
  std::string driver;  ///< "sriov", "ib-sriov", "vdpa": the op's JSON name is "<driver>.<verb>"
  std::string pci;
  std::string container_id;
  std::string ifname;
  template <class V> void owner_fields(V& v) { v("pci", pci); v("container_id", container_id); v("ifname", ifname); }
};

/// Drop the VF's allocation record.
struct VfRelease : VfOwner {
  static constexpr std::string_view kVerb = "release";
  template <class V> void fields(V& v) { owner_fields(v); }
};

/// The sysfs root a VF operation without "sysfs_root" (every record before it was recorded, and
/// every one of a node whose plumb config has no sysfsRoot) rebinds under.
inline constexpr std::string_view kDefaultSysfsRoot = "/sys";

/// Put the VF's PF-side settings back, in order (then rebind its driver when set, under
/// `sysfs_root`: the ADD's plumb config sysfsRoot, recorded when it is not kDefaultSysfsRoot).
struct VfRestore : VfOwner {
  static constexpr std::string_view kVerb = "restore_vf";
  std::string pf;
  std::vector<vf::VfSetting> settings;  ///< engine/kernel/vf.hpp, applied in order
  std::optional<std::string> rebind_driver;
  std::optional<std::string> sysfs_root;
  template <class V>
  void fields(V& v) {
    owner_fields(v);
    v("pf", pf);
    v("settings", settings);
    v("rebind_driver", rebind_driver);
    v("sysfs_root", sysfs_root);
  }
};

/// The VF netdev back to the node under its original name, then its MAC/MTU when changed. A VF
/// whose driver was reloaded has a new netdev, found under `sysfs_root` (recorded when it is not
/// kDefaultSysfsRoot).
struct VfReturnNetdev : VfOwner {
  static constexpr std::string_view kVerb = "return_netdev";
  std::string name;
  std::string hwaddr;  ///< "aa:bb:..", any length (IPoIB has 20 bytes)
  uint32_t mtu_bytes = 0;
  bool mac_changed = false;
  bool mtu_changed = false;
  std::optional<std::string> sysfs_root;
  template <class V> void fields(V& v) {
    owner_fields(v); v("name", name); v("hwaddr", hwaddr); v("mtu", mtu_bytes); v("mac_changed", mac_changed); v("mtu_changed", mtu_changed);
    v("sysfs_root", sysfs_root);
  }
};

/// The VF's RDMA device back to the node namespace.
struct RdmaReturn : VfOwner {
  static constexpr std::string_view kVerb = "rdma_return";
  std::string device;
  template <class V> void fields(V& v) { owner_fields(v); v("device", device); }
};

/// A CNI plugin plumb delegated to (a plugin of the network's list, or the IPAM of one of plumb's
/// drivers): DEL with the exact config its ADD got, after the NAD, annotation or netns are gone.
/// Its binary is looked up again by type (binDir, CNI_PATH) at DEL, as libcni does.
struct DelegateDel {
  static constexpr std::string_view kName = "delegate.del";
  std::string type;       ///< the plugin type (binary name)
  json::Document config;  ///< the config object its ADD got on stdin, without prevResult
  std::string ifname;     ///< CNI_IFNAME of the ADD
  std::string args;       ///< CNI_ARGS of the ADD
  template <class V> void fields(V& v) { v("type", type); v("config", config); v("ifname", ifname); v("args", args); }
};

/// A delegated plugin's process, recorded once started and before it got its config: if the
/// ADD that started it was killed and the plugin still runs, its process group gets SIGKILL
/// (before its DEL runs). A process that has ended, or a reused pid, is left alone.
struct DelegateEndProcess {
  static constexpr std::string_view kName = "delegate.end_process";
  int pid = 0;
  uint64_t start_time = 0;  ///< /proc/<pid>/stat starttime (engine/base/spawn.hpp Child)
  template <class V> void fields(V& v) { v("pid", pid); v("startTime", start_time); }
};

using Op = std::variant<LinkDel, BridgeDelIfUnused, IpamRelease, MasqDel, DevinfoRemove, TuningRestore,
                        HostDeviceRestore, PortmapRemove, BandwidthRemove, VfRelease, VfRestore, VfReturnNetdev,
                        RdmaReturn, SbrRestore, FirewallRemove, VrfRelease, MacspoofDel, DelegateDel,
                        DelegateEndProcess, AddrDel, AddrRestore, SysctlRestore, FirewallReleaseBridge>;

/// The operation's JSON name: kName, or "<driver>.<verb>" for VF operations.
[[nodiscard]] std::string name_of(const Op& op);
/// The one writer: {"op": name, <fields>...}, and "ifUnknown": "skip" for an operation whose
/// kSkipIfUnknown is true (engine/state/journal.hpp txn::skippable_if_unknown). Engine values
/// (IpAddr, IpPrefix, Mac) are written as their text; nft::PortMapping and route::Route with the keys
/// above.
[[nodiscard]] json::Document encode(const Op& op);
/// The one reader. `origin` (the record's path) is named in errors. Errors: kDecode naming the
/// origin, the operation and the missing or mistyped field; an unknown "op" is kNewerRecord
/// "unknown undo operation ... (written by a newer plumb?)".
[[nodiscard]] Result<Op> decode(const json::Value& v, const std::string& origin);

/// Announces `op` (the inverse of the change about to be made) in ctx.journal, which persists it
/// before returning. rollback_only: run only when undoing an ADD that did not complete (e.g.
/// deleting a shared bridge this ADD created), never by the DEL of a completed attachment.
/// Errors: the state write failed (ENOSPC, EROFS ...): the change must then not be made.
[[nodiscard]] Status will(Context& ctx, Op op, bool rollback_only = false);
/// Announces `op` to be persisted with the next will() (txn::Journal::will_later): the inverse
/// of a change made only after that next intent's change. False without a journal.
bool will_later(Context& ctx, Op op);

/// The one dispatch: runs one operation. Missing objects are success.
[[nodiscard]] Status run(Context& ctx, const Op& op);

/// Decodes every operation of a record's undo list without running any: a record whose list
/// this binary cannot read whole is not run at all. With `allow_unknown`, an operation this
/// binary does not know (a newer plumb's) passes: unwind() keeps it. Errors: decode()'s
/// (kDecode; kNewerRecord unless `allow_unknown`), naming `origin`; kDecode when `undo` is not a
/// list.
[[nodiscard]] Status check(const json::Value& undo, const std::string& origin, bool allow_unknown = false);

/// What an unwind left for a plumb that knows more operations (a newer one): the entries
/// verbatim (envelope included), oldest first, and the names of the unknown ones among them.
struct Kept {
  json::Document entries{rapidjson::kArrayType};
  std::vector<std::string> unknown;
  [[nodiscard]] bool empty() const { return entries.Empty(); }
};

/// Runs the operations of a record's undo list (JSON array, oldest first) newest first, once
/// check() passed (txn::unwind: with `complete`, rollback-only ones are skipped; every operation
/// is tried even when one fails; the first error is returned after all were tried). `origin`
/// (the record's path) is named in errors. Without `kept`, an unknown operation is an error
/// (kNewerRecord) before anything runs. With `kept`, unknown operations are handled as their
/// "ifUnknown" says (txn::skippable_if_unknown): one that may be skipped is kept alone, one that
/// may not is kept with every entry before it (which then do not run); `kept` gets them.
[[nodiscard]] Status unwind(Context& ctx, const json::Value& undo, bool complete, const std::string& origin, Kept* kept = nullptr);

// Each operation's executor, defined next to the code that makes the change it undoes.
[[nodiscard]] Status run_op(Context& ctx, const LinkDel& op);            // common.cpp
[[nodiscard]] Status run_op(Context& ctx, const BridgeDelIfUnused& op);  // bridge.cpp
[[nodiscard]] Status run_op(Context& ctx, const IpamRelease& op);        // common.cpp
[[nodiscard]] Status run_op(Context& ctx, const MasqDel& op);            // bridge.cpp
[[nodiscard]] Status run_op(Context& ctx, const DevinfoRemove& op);      // common.cpp
[[nodiscard]] Status run_op(Context& ctx, const TuningRestore& op);      // tuning.cpp
[[nodiscard]] Status run_op(Context& ctx, const HostDeviceRestore& op);  // host_device.cpp
[[nodiscard]] Status run_op(Context& ctx, const PortmapRemove& op);      // portmap.cpp
[[nodiscard]] Status run_op(Context& ctx, const BandwidthRemove& op);    // bandwidth.cpp
[[nodiscard]] Status run_op(Context& ctx, const VfRelease& op);          // vf_attach.cpp
[[nodiscard]] Status run_op(Context& ctx, const VfRestore& op);          // vf_attach.cpp
[[nodiscard]] Status run_op(Context& ctx, const VfReturnNetdev& op);     // vf_attach.cpp
[[nodiscard]] Status run_op(Context& ctx, const RdmaReturn& op);         // vf_attach.cpp
[[nodiscard]] Status run_op(Context& ctx, const SbrRestore& op);         // sbr.cpp
[[nodiscard]] Status run_op(Context& ctx, const FirewallRemove& op);     // firewall.cpp
[[nodiscard]] Status run_op(Context& ctx, const VrfRelease& op);         // vrf.cpp
[[nodiscard]] Status run_op(Context& ctx, const MacspoofDel& op);        // bridge.cpp
[[nodiscard]] Status run_op(Context& ctx, const DelegateDel& op);        // delegate.cpp
[[nodiscard]] Status run_op(Context& ctx, const DelegateEndProcess& op); // delegate.cpp
[[nodiscard]] Status run_op(Context& ctx, const AddrDel& op);            // steps.cpp
[[nodiscard]] Status run_op(Context& ctx, const AddrRestore& op);        // steps.cpp
[[nodiscard]] Status run_op(Context& ctx, const SysctlRestore& op);      // steps.cpp
[[nodiscard]] Status run_op(Context& ctx, const FirewallReleaseBridge& op);  // firewall.cpp

}  // namespace plumb::drivers::undo
