// Write-ahead by construction: a driver describes each kernel change as a typed step, and one
// executor makes it. The journal executor (the default) persists the step's inverse (an undo
// operation, drivers/undo.hpp) in the attachment's record and only then applies the step; the
// recording executor keeps the steps and their inverses for tests (and applies them only when
// asked), so a driver's steps can be asserted without reading the kernel back.
//
// A step's apply lives in steps.cpp alone: drivers reach the mutating engine calls of the steps
// below only through run() (the ctest entry `layering/write_ahead` fails when a driver file calls
// them or undo::will() itself).
//
// Adding a kind of change: a struct here (its fields: everything apply and its inverse need), its
// inverse() and apply() in steps.cpp, an undo operation in undo.hpp if none fits.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "drivers/driver.hpp"
#include "drivers/undo.hpp"
#include "drivers/vf_attach.hpp"
#include "ebpf/loader.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/spawn.hpp"
#include "engine/kernel/bridge_port.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/rule.hpp"
#include "engine/kernel/tc.hpp"
#include "engine/kernel/tun.hpp"
#include "engine/nft/conntrack.hpp"
#include "engine/nft/firewall.hpp"
#include "engine/nft/portmap.hpp"

namespace plumb::drivers::steps {

/// Creates bridge spec.name in the node (EEXIST: another ADD made it meanwhile, success).
/// Inverse: bridge_del_if_unused, rollback only (a shared bridge stays once an ADD completed).
struct CreateBridge {
  link::BridgeSpec spec;
};

/// Adds `prefix` to link `ifname` (ifindex `index`) in the node (EEXIST is success). Inverse:
/// addr_del; `shared` (the bridge's gateway address, which every pod of the bridge uses): rollback
/// only, and with `bridge` (not empty) kept while that bridge has a port other than `port`, the
/// attachment's own.
struct AddNodeAddress {
  int index = 0;
  std::string ifname;
  IpPrefix prefix;
  bool nodad = true;
  bool shared = true;
  std::string bridge = {};
  std::string port = {};
};

/// Removes `prefix` from link `ifname` (ifindex `index`) in the node (bridge forceAddress).
/// Inverse: addr_restore, rollback only (a completed ADD's replacement stays, as the reference).
struct RemoveNodeAddress {
  int index = 0;
  std::string ifname;
  IpPrefix prefix;
};

/// Writes node sysctl `key` ('/' separated under /proc/sys) = `value`. Inverse: sysctl_restore
/// with the value read just before, rollback only; none when it already has `value`.
struct WriteNodeSysctl {
  std::string key;
  std::string value;
};

/// Adds the MAC spoof check of bridge port `port` (the pod's `mac`, owner "<container>/<ifname>").
/// Inverse: bridge.macspoof_del.
struct AddMacspoof {
  std::string port;
  Mac mac;
  std::string owner;
};

/// Masquerades traffic from `pod` leaving the node, but towards `subnets` (network `network`'s).
/// Inverse: masq_del.
struct AddMasquerade {
  std::string network;
  std::vector<IpPrefix> subnets;
  IpAddr pod;
};

/// Adds an attachment's host port mappings to plumb's nftables maps. Inverse: portmap.remove.
struct AddPortMappings {
  nft::PodPortMappings mappings;
};

/// Deletes the conntrack entries matching `filters` (portmap: stale UDP flows through host ports
/// just mapped). No inverse: a flow deleted is re-created by its next packet.
struct FlushConntrack {
  std::vector<nft::conntrack::Filter> filters;
};

/// A dummy device (link::create_dummy), named by the step.
struct DummyLink {};

/// Creates link `ifname` born in the pod namespace: a dummy in it, or a macvlan, ipvlan or vlan
/// on a master, the message sent through the pod's socket (`via_pod`: the master is there, or a
/// dummy) or the node's (the spec's netns_fd moves it to the pod). The spec's name must be
/// `ifname`. Inverse: link_del in the pod of `ifname`, limited to links of `group` when set (a
/// spec made in link::kPodLinkGroup: never a link someone else made under that name). Errors: the
/// kernel's, unprefixed (EEXIST: the name is taken; kKernelFeature: no such link kind).
using PodLinkSpec = std::variant<DummyLink, link::MacvlanSpec, link::IpvlanSpec, link::VlanSpec>;
struct CreatePodLink {
  std::string ifname;
  std::optional<uint32_t> group;
  bool via_pod = true;
  PodLinkSpec spec;
};

/// Writes sysctl `key` ('/' separated under /proc/sys) = `value` in the pod namespace, a setting
/// of the pod's own interface (ndisc_notify). No inverse: it goes with the interface.
struct WritePodSysctl {
  std::string key;
  std::string value;
};

/// Creates tap device spec.name in the pod namespace, labelled with SELinux context
/// `selinux_context` when not empty (tun::create_tap_labelled). Inverse: link_del in the pod of
/// spec.name. Errors: the kernel's, unprefixed (kConflict: the name is taken).
struct CreatePodTap {
  tun::TapSpec spec;
  std::string selinux_context;
};

/// Changes link `index` of the pod namespace, one this attachment created or the namespace's own
/// lo (its name, MTU, MAC, master, up, arp_notify). Inverse: when it renames the link, link_del in the pod of the new
/// name (the deletion recorded under the old one no longer finds it); otherwise none: the
/// settings go with the link.
struct SetUpPodLink {
  int index = 0;
  link::LinkChange change;
};

/// Tunes pod link `ifname` (ifindex `index`), which an earlier plugin made: writes `sysctls` ('/'
/// keys under /proc/sys of the pod namespace -> values, in order), then sets the link attributes
/// `change` holds (MAC, MTU, promisc, allmulti, txqueuelen). Inverse: tuning.restore with the
/// values read just before of exactly what it changes. Errors: a sysctl that cannot be read or
/// written, naming it; the kernel's.
struct TunePodLink {
  int index = 0;
  std::string ifname;
  std::vector<std::pair<std::string, std::string>> sysctls;
  link::LinkChange change;
};

/// The namespace a step on an attachment's own link acts in.
enum class Ns { kNode, kPod };

/// Changes link `index` of the node namespace, one this attachment created (a veth's host end:
/// up). No inverse: the settings go with the link, deleted by the operation its creation recorded.
struct SetUpNodeLink {
  int index = 0;
  link::LinkChange change;
};

/// Adds `prefix` to link `index` in `ns`, one this attachment created (EEXIST is success when
/// `exist_ok`; else the kernel's error, as the pod's addresses from an IPAM). No inverse: the
/// address goes with the link.
struct AddOwnLinkAddress {
  Ns ns = Ns::kPod;
  int index = 0;
  IpPrefix prefix;
  bool nodad = true;
  bool exist_ok = true;
};

/// Adds `route` in `ns` through a link this attachment created or an earlier plugin of its chain
/// made (`exist_ok`: an identical route already there is success). No inverse: the route goes
/// with the link, or an earlier step's inverse takes it back (sbr's tables: AddSourceRules).
struct AddOwnLinkRoute {
  Ns ns = Ns::kPod;
  route::Route route;
  bool exist_ok = false;
};

/// Removes `route` in `ns` through a link this attachment created (gone already: success). No
/// inverse: the link it belonged to is deleted with the attachment, or an earlier step's inverse
/// puts it back (sbr's main-table routes: AddSourceRules).
struct RemoveOwnLinkRoute {
  Ns ns = Ns::kPod;
  route::Route route;
};

/// Writes node sysctl `key` = `value` of a link this attachment created (its host veth's
/// accept_ra). No inverse: the setting goes with the link.
struct WriteNodeLinkSysctl {
  std::string key;
  std::string value;
};

/// Turns on IP forwarding of `family` in the node (netconf::ensure_forwarding: nothing written
/// when on). No inverse: node-wide, other attachments rely on it, and the reference plugins never
/// turn it off.
struct EnableForwarding {
  int family = 0;
};

/// Routes the pod's traffic by source (sbr): adds `rules` in the pod namespace (an identical rule
/// there is an error). Inverse: `restore` (sbr.restore): these rules, and the tables and
/// main-table routes sbr's route steps after this one fill and remove, so that one operation,
/// recorded before any of sbr's changes, takes them all back.
struct AddSourceRules {
  std::vector<rule::Rule> rules;
  undo::SbrRestore restore;
};

/// Moves node device `dev` into the pod namespace, renamed `ifname` there (host-device). Inverse:
/// host-device.restore with its node name, ifindex, MTU and MAC as `dev` has them.
struct MoveLinkIntoPod {
  link::LinkInfo dev;
  std::string ifname;
};

/// Admits an attachment's addresses in plumb's firewall sets (the firewall plugin). Inverse:
/// firewall.remove of exactly those.
struct AddFirewallPod {
  nft::FirewallPod pod;
};

/// Adds bridge `bridge` to the isolation sets (ingressPolicy same-bridge, or `isolated`) with the
/// claim of attachment `container_id`/`ifname` on them. Inverse: firewall.release_bridge (the
/// claim out; the bridge out of the sets no other attachment still claims).
struct IsolateBridge {
  std::string bridge;
  bool isolated = false;
  std::string container_id;
  std::string ifname;
};

/// Makes pod link `ifname` (ifindex `index`) a port of VRF `vrf` in the pod namespace, creating
/// the VRF on table `create_table` first (up) when set. Inverse: vrf.release (the link out of the
/// VRF, the VRF deleted once it has no port left). Errors: the kernel's (kKernelFeature: no VRF
/// support), naming the VRF.
struct JoinPodVrf {
  std::string vrf;
  std::optional<uint32_t> create_table;
  int index = 0;
  std::string ifname;
};

/// Writes an attachment's limits into the shaping programs' maps (bandwidth): each of `entries`
/// under `owner`, claimed with BPF_NOEXIST when `exclusive` (a pod-side id). Inverse: `remove`
/// (bandwidth.remove: these entries, and the clsact, filters and fq of the shaping steps after
/// this one, so one operation recorded before any of them takes them all back). Errors: the
/// maps' (kConflict: a key another attachment holds; the entries written are removed again).
struct WriteBandwidthEntries {
  const ebpf::Programs* progs = nullptr;
  std::vector<std::pair<plumb_bw_key, ebpf::Limit>> entries;
  uint64_t owner = 0;
  bool exclusive = false;
  undo::BandwidthRemove remove;
};

/// Adds the clsact qdisc to link `index` in `ns` (EEXIST returned: the caller decides). No
/// inverse: bandwidth.remove (WriteBandwidthEntries) deletes it when `remove.clsact` says so.
struct AddClsact {
  Ns ns = Ns::kNode;
  int index = 0;
};

/// Attaches program `prog_fd` (`prog_name`) at `hook` of link `index` in `ns`, for traffic class
/// `classid` (0: host side). No inverse: bandwidth.remove detaches it.
struct AttachShapingFilter {
  Ns ns = Ns::kNode;
  int index = 0;
  tc::Hook hook{};
  int prog_fd = -1;
  std::string prog_name;
  uint32_t classid = 0;
};

/// Makes fq the root qdisc of link `index` in `ns` (EDT shaping). No inverse: bandwidth.remove
/// deletes it when `remove.fq` says so.
struct SetRootFq {
  Ns ns = Ns::kNode;
  int index = 0;
};

/// Brings bridge `index` (`name`) up and/or promiscuous (`change`), one this attachment found or
/// created. No inverse: every pod of the bridge relies on it, and the reference never reverts it.
struct SetUpBridge {
  int index = 0;
  std::string name;
  link::LinkChange change;
};

/// Sets the bridge-port options of node link `index`, a port this attachment created (its veth's
/// host end, or the VLAN gateway veth's peer): hairpin when `hairpin`, isolation when `isolated`.
/// No inverse: the options go with the link.
struct SetBridgePort {
  int index = 0;
  bool hairpin = false;
  bool isolated = false;
};

/// Replaces the VLANs of node bridge port `index` (`port`), one this attachment created: removes
/// `remove` (VIDs), then adds `add` in order. No inverse: the VLANs go with the link. Errors: the
/// kernel's (kKernelFeature: no bridge VLAN filtering).
struct SetPortVlans {
  int index = 0;
  std::string port;
  std::vector<uint16_t> remove;
  std::vector<bridge_port::PortVlan> add;
};

/// Creates veth pair `spec` with both ends in the node: the VLAN gateway interface
/// spec.peer_name, which every pod of the VLAN shares, and its bridge-port peer spec.host_name.
/// Inverse: link_del in the node of spec.peer_name, rollback only (a completed ADD's gateway
/// stays, as the reference's).
struct CreateSharedVeth {
  link::VethSpec spec;
};

// --- the VF drivers (sriov, ib-sriov, vdpa, rdma; their shared code is drivers/vf_attach.hpp) ---
// Each VF inverse names the attachment that holds the VF (undo::VfOwner: its driver, the VF's
// PCI address, the container and interface): it runs only while the VF's allocation record still
// names them. The PF and RDMA backends (vf_attach::Backends, non-owning) make the changes; a
// recording executor that does not apply needs none.

/// Puts back, through `pf`, the PF settings `stale.restore` saved by an owner whose pod namespace
/// is gone (a reclaim, before ClaimVf takes the VF over). No inverse: it returns the VF to how it
/// was before that owner. Errors: the PF backend's, naming the VF and the stale owner.
struct ReclaimVf {
  vf::PfOps* pf = nullptr;
  vf_attach::Allocation stale;
};

/// Writes VF allocation record `alloc` under ctx.state_dir (the VF is this attachment's). Inverse:
/// "<alloc.type>.release".
struct ClaimVf {
  vf_attach::Allocation alloc;
};

/// Applies `apply` to the VF through PF netdev `pf_netdev` (one setting per message, in order),
/// then, with `rebind_now`, unbinds and binds the VF's `rebind_driver` under `sysfs_root` so they
/// take effect (ib-sriov's GUIDs). Inverse: "<owner.driver>.restore_vf" with `restore` (in restore
/// order) and `rebind_driver` ("" for none) under `sysfs_root`. Errors: the PF backend's and
/// sysfs's, naming the VF.
struct SetVfSettings {
  vf::PfOps* pf = nullptr;
  undo::VfOwner owner;
  std::string pf_netdev;
  std::vector<vf::VfSetting> apply;
  std::vector<vf::VfSetting> restore;
  std::string rebind_driver;
  bool rebind_now = false;
  std::string sysfs_root;
};

/// Reloads VF driver `driver` (unbind, bind under `sysfs_root`) so a MAC its PF was told reaches
/// the VF netdev (igbvf refuses it on the netdev). Inverse: "<owner.driver>.restore_vf" with no
/// settings and `driver` to rebind, on PF netdev `pf_netdev`. Errors: sysfs's, naming the file.
struct ReloadVfDriver {
  undo::VfOwner owner;
  std::string pf_netdev;
  std::string driver;
  std::string sysfs_root;
};

/// Takes VF netdev `orig` of the node for this attachment, before anything changes it: the MAC
/// its PF is told reaches it (igb), then ChangeVfNetdev and MoveVfNetdev. Changes nothing itself.
/// Inverse: "<owner.driver>.return_netdev" with its name, hardware address and MTU, restoring the
/// MAC with `mac_changed`, the MTU with `mtu_changed` (and `sysfs_root` when it is not /sys): the
/// one operation covering those later changes, recorded before any of them.
struct TakeVfNetdev {
  undo::VfOwner owner;
  vf_attach::NetdevOrig orig;
  bool mac_changed = false;
  bool mtu_changed = false;
  std::string sysfs_root;  ///< where return_netdev finds a netdev that a driver reload renamed
};

/// Changes VF netdev `index` while it is in the node (a MAC its PF was told; its name back after
/// a driver reload). No inverse: TakeVfNetdev's return_netdev puts name and MAC back.
struct ChangeVfNetdev {
  int index = 0;
  link::LinkChange change;
};

/// Moves VF netdev `index` (node name `name`) into the pod as ctx.ifname in one message, then sets
/// `mac` and `mtu_bytes` there when given and different. No inverse: TakeVfNetdev's return_netdev.
/// Errors: the kernel's (EEXIST: the name is taken), naming the netdev and the namespace.
struct MoveVfNetdev {
  int index = 0;
  std::string name;
  std::optional<Mac> mac;
  std::optional<uint32_t> mtu_bytes;
};

/// Moves RDMA device `device` from the node into the pod namespace through `rdma`. Inverse:
/// "<owner.driver>.rdma_return" of `device`. Errors: the backend's, unprefixed.
struct MoveRdmaIntoPod {
  rdma::Ops* rdma = nullptr;
  undo::VfOwner owner;
  std::string device;
};

using Step = std::variant<CreateBridge, AddNodeAddress, RemoveNodeAddress, WriteNodeSysctl, AddMacspoof, AddMasquerade,
                          AddPortMappings, FlushConntrack, CreatePodLink, WritePodSysctl, CreatePodTap, SetUpPodLink,
                          TunePodLink, SetUpNodeLink, AddOwnLinkAddress, AddOwnLinkRoute, RemoveOwnLinkRoute,
                          WriteNodeLinkSysctl, EnableForwarding, AddSourceRules, MoveLinkIntoPod, AddFirewallPod,
                          IsolateBridge, JoinPodVrf, WriteBandwidthEntries, AddClsact, AttachShapingFilter, SetRootFq,
                          SetUpBridge, SetBridgePort, SetPortVlans, CreateSharedVeth, ReclaimVf, ClaimVf, SetVfSettings,
                          ReloadVfDriver, TakeVfNetdev, ChangeVfNetdev, MoveVfNetdev, MoveRdmaIntoPod>;

// --- Calls: steps that return what they made --------------------------------------------------------
// A call is a step whose apply returns a value (the veth pair as made, an IPAM's or a delegated
// plugin's result). Its inverse is persisted before it runs, as a step's; a call that runs a
// process (a delegated plugin or IPAM) reports the process through Executor::started once it
// exists, so a teardown after a kill ends it first.

/// Creates the pod's veth pair `spec` from the node: the pod end spec.peer_name in the namespace
/// of spec.peer_netns_fd, the host end spec.host_name in the node. Output: both ends, the host end
/// as the kernel echoed it (else read back), the pod end read back. Inverse: link_del in the node
/// of spec.host_name. Errors: the creation's unprefixed (EEXIST: a name is taken); kKernel when an
/// end is not found after it.
struct CreatePodVeth {
  link::VethSpec spec;
  using Output = PodVeth;
};

/// Allocates the attachment's addresses with `use`'s IPAM for `req` (a delegated IPAM's process
/// reported through Executor::started). Output: the IPAM's result. Inverse: a delegated IPAM's DEL
/// (delegate_del with the whole plugin config, CNI IPAM delegation); plumb's own IPAM's
/// ipam_release; none when `announced` (announce() recorded the release with the step after it).
/// Errors: the IPAM's.
struct AllocateAddresses {
  const IpamUse* use = nullptr;
  ipam::Request req;
  bool announced = false;
  using Output = cni::CniResult;
};

/// Runs delegated plugin `type` (executable `binary`) for `inv` (an ADD) with `input` on its
/// standard input (CNI SPEC execution protocol), its process reported through Executor::started.
/// Output: its result, decoded from cniVersion `version`. Inverse: `del` (delegate_del with the
/// exact config, without prevResult). Errors: the plugin's (its CNI error), or its output's.
struct RunPlugin {
  std::string type;
  std::string binary;
  cni::Invocation inv;
  std::string input;
  std::string version;
  undo::DelegateDel del;
  using Output = cni::CniResult;
};

using Call = std::variant<CreatePodVeth, AllocateAddresses, RunPlugin>;
/// What a call returns: its Output.
using Output = std::variant<PodVeth, cni::CniResult>;

/// A step's inverse as the journal records it: nullopt when the step changes nothing.
struct Inverse {
  undo::Op op;
  bool rollback_only = false;
};

/// The step's name, for messages and recordings ("create_bridge", "add_node_address", ...).
[[nodiscard]] std::string name_of(const Step& step);
/// The inverse of `step` as it would be applied now (may read the kernel: a sysctl's previous
/// value). nullopt: the step would change nothing. Errors: the kernel's, naming what was read.
[[nodiscard]] Result<std::optional<Inverse>> inverse_of(Context& ctx, const Step& step);

/// The call's name, for messages and recordings ("create_pod_veth", "allocate_addresses", ...).
[[nodiscard]] std::string name_of(const Call& call);
/// The inverse of `call` (ctx: the attachment's network, ifname and CNI_ARGS). nullopt: nothing
/// to record (an announced release).
[[nodiscard]] std::optional<Inverse> inverse_of(const Context& ctx, const Call& call);

/// What makes a step: persists its inverse, then applies it. One executor serves one
/// attachment's chain (ADD only): it also keeps the pod veth pairs its calls made, for the later
/// plugins of the chain.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Makes `step` with inverse `inv` (nullopt: nothing to record). Errors: the journal's write
  /// (the step is then not applied) or the step's.
  [[nodiscard]] virtual Status make(Context& ctx, const Step& step, std::optional<Inverse> inv) = 0;
  /// Makes `call` with inverse `inv` (nullopt: only what announce() registered is persisted
  /// first). Errors: as make(step).
  [[nodiscard]] virtual Result<Output> make(Context& ctx, const Call& call, std::optional<Inverse> inv) = 0;
  /// Registers `inv` to be persisted with the next step's or call's inverse (one record write for
  /// both: the IPAM's release, recorded with the link its addresses go on, which is made first).
  /// False: nothing can hold it (no journal); the call then records its own.
  virtual bool announce(Context& ctx, Inverse inv) = 0;
  /// A process a call started (delegated plugin or IPAM), recorded before it reads its input.
  /// Errors: the journal's write (the process is then ended by the caller).
  [[nodiscard]] virtual Status started(Context& ctx, const process::Child& child) = 0;

  /// The pod veth pairs this executor's CreatePodVeth calls made, by pod interface name, as made
  /// (a later plugin of the chain, bandwidth, takes its device from here instead of reading it
  /// back). Emptied when a RunPlugin call runs: a delegated plugin may change them.
  std::map<std::string, PodVeth>& made_veths() { return made_veths_; }

 private:
  std::map<std::string, PodVeth> made_veths_;
};

/// The executor of every invocation: undo::will() with the inverse, then the step.
class JournalExecutor final : public Executor {
 public:
  [[nodiscard]] Status make(Context& ctx, const Step& step, std::optional<Inverse> inv) override;
  [[nodiscard]] Result<Output> make(Context& ctx, const Call& call, std::optional<Inverse> inv) override;
  bool announce(Context& ctx, Inverse inv) override;
  [[nodiscard]] Status started(Context& ctx, const process::Child& child) override;
};

/// Tests: keeps every step and call with its encoded inverse, in order; applies them (without a
/// journal) only with `apply`. Without it a call returns `answer` (an IPAM's or plugin's result)
/// or an empty PodVeth. An announced inverse is kept as "announce <call>", a started process as
/// "started_process" with its end_process inverse.
class RecordingExecutor final : public Executor {
 public:
  struct Made {
    std::string step;  ///< name_of(step)
    std::optional<Inverse> inverse;
  };
  explicit RecordingExecutor(bool apply = false) : apply_(apply) {}
  [[nodiscard]] Status make(Context& ctx, const Step& step, std::optional<Inverse> inv) override;
  [[nodiscard]] Result<Output> make(Context& ctx, const Call& call, std::optional<Inverse> inv) override;
  bool announce(Context& ctx, Inverse inv) override;
  [[nodiscard]] Status started(Context& ctx, const process::Child& child) override;
  [[nodiscard]] const std::vector<Made>& made() const { return made_; }
  cni::CniResult answer;

 private:
  bool apply_;
  std::vector<Made> made_;
};

/// The one way a migrated driver changes the kernel: the step's inverse computed, then made by
/// ctx.executor (null: a JournalExecutor). Errors: inverse_of's, the executor's.
[[nodiscard]] Status run(Context& ctx, const Step& step);

/// The call counterpart of run(): made by ctx.executor (null: a JournalExecutor, which keeps no
/// veth pair). Errors: the executor's.
[[nodiscard]] Result<Output> call_any(Context& ctx, const Call& call);

/// call_any() typed: `C`'s Output.
template <class C>
[[nodiscard]] Result<typename C::Output> call(Context& ctx, C c) {
  auto out = PLUMB_TRY(call_any(ctx, Call{std::move(c)}));
  return std::get<typename C::Output>(std::move(out));
}

/// Registers the inverse of `call` with ctx.executor (Executor::announce) to be persisted with
/// the next step's. Returns whether it did: the call is then made with `announced`.
bool announce(Context& ctx, const Call& call);

}  // namespace plumb::drivers::steps
