// The typed steps' inverses and applies, the executors, and the undo operations that invert the
// steps no driver file owns (drivers/steps.hpp).
#include "drivers/steps.hpp"

#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <type_traits>

#include "engine/cni/delegate.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/bridge_port.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/pci.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/nft/macspoof.hpp"
#include "engine/nft/nft.hpp"

namespace plumb::drivers::steps {
namespace {

std::string step_name(const CreateBridge&) { return "create_bridge"; }
std::string step_name(const AddNodeAddress&) { return "add_node_address"; }
std::string step_name(const RemoveNodeAddress&) { return "remove_node_address"; }
std::string step_name(const WriteNodeSysctl&) { return "write_node_sysctl"; }
std::string step_name(const AddMacspoof&) { return "add_macspoof"; }
std::string step_name(const AddMasquerade&) { return "add_masquerade"; }
std::string step_name(const AddPortMappings&) { return "add_port_mappings"; }
std::string step_name(const FlushConntrack&) { return "flush_conntrack"; }
std::string step_name(const CreatePodLink&) { return "create_pod_link"; }
std::string step_name(const WritePodSysctl&) { return "write_pod_sysctl"; }
std::string step_name(const CreatePodTap&) { return "create_pod_tap"; }
std::string step_name(const SetUpPodLink&) { return "set_up_pod_link"; }
std::string step_name(const TunePodLink&) { return "tune_pod_link"; }
std::string step_name(const SetUpNodeLink&) { return "set_up_node_link"; }
std::string step_name(const AddOwnLinkAddress&) { return "add_own_link_address"; }
std::string step_name(const AddOwnLinkRoute&) { return "add_own_link_route"; }
std::string step_name(const RemoveOwnLinkRoute&) { return "remove_own_link_route"; }
std::string step_name(const WriteNodeLinkSysctl&) { return "write_node_link_sysctl"; }
std::string step_name(const EnableForwarding&) { return "enable_forwarding"; }
std::string step_name(const AddSourceRules&) { return "add_source_rules"; }
Result<std::optional<Inverse>> inverse(Context&, const AddSourceRules& s) { return Inverse{s.restore, false}; }
std::string step_name(const MoveLinkIntoPod&) { return "move_link_into_pod"; }
std::string step_name(const AddFirewallPod&) { return "add_firewall_pod"; }
std::string step_name(const IsolateBridge&) { return "isolate_bridge"; }
std::string step_name(const JoinPodVrf&) { return "join_pod_vrf"; }
std::string step_name(const WriteBandwidthEntries&) { return "write_bandwidth_entries"; }
std::string step_name(const AddClsact&) { return "add_clsact"; }
std::string step_name(const AttachShapingFilter&) { return "attach_shaping_filter"; }
std::string step_name(const SetRootFq&) { return "set_root_fq"; }
std::string step_name(const SetUpBridge&) { return "set_up_bridge"; }
std::string step_name(const SetBridgePort&) { return "set_bridge_port"; }
std::string step_name(const SetPortVlans&) { return "set_port_vlans"; }
std::string step_name(const CreateSharedVeth&) { return "create_shared_veth"; }
Result<std::optional<Inverse>> inverse(Context&, const CreateSharedVeth& s) {
  return Inverse{undo::LinkDel{"node", s.spec.peer_name, std::nullopt}, true};
}
std::string step_name(const ReclaimVf&) { return "reclaim_vf"; }
std::string step_name(const ClaimVf&) { return "claim_vf"; }
std::string step_name(const SetVfSettings&) { return "set_vf_settings"; }
std::string step_name(const ReloadVfDriver&) { return "reload_vf_driver"; }
std::string step_name(const TakeVfNetdev&) { return "take_vf_netdev"; }
std::string step_name(const ChangeVfNetdev&) { return "change_vf_netdev"; }
std::string step_name(const MoveVfNetdev&) { return "move_vf_netdev"; }
std::string step_name(const MoveRdmaIntoPod&) { return "move_rdma_into_pod"; }
Result<std::optional<Inverse>> inverse(Context&, const WriteBandwidthEntries& s) { return Inverse{s.remove, false}; }
Result<std::optional<Inverse>> inverse(Context&, const JoinPodVrf& s) {
  return Inverse{undo::VrfRelease{s.vrf, s.ifname}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const AddFirewallPod& s) {
  return Inverse{undo::FirewallRemove{s.pod.container_id, s.pod.ifname, s.pod.addresses, s.pod.admin_chain}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const IsolateBridge& s) {
  return Inverse{undo::FirewallReleaseBridge{s.bridge, s.isolated, s.container_id, s.ifname}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const MoveLinkIntoPod& s) {
  return Inverse{undo::HostDeviceRestore{s.dev.name, s.ifname, s.dev.index, s.dev.mtu_bytes, s.dev.mac()}, false};
}

/// Steps whose change goes with a link this attachment created, or that nothing undoes.
template <class S>
  requires std::is_same_v<S, SetUpNodeLink> || std::is_same_v<S, AddOwnLinkAddress> ||
           std::is_same_v<S, AddOwnLinkRoute> || std::is_same_v<S, RemoveOwnLinkRoute> ||
           std::is_same_v<S, WriteNodeLinkSysctl> || std::is_same_v<S, EnableForwarding> ||
           std::is_same_v<S, AddClsact> || std::is_same_v<S, AttachShapingFilter> || std::is_same_v<S, SetRootFq> ||
           std::is_same_v<S, SetUpBridge> || std::is_same_v<S, SetBridgePort> || std::is_same_v<S, SetPortVlans> ||
           std::is_same_v<S, ReclaimVf> || std::is_same_v<S, ChangeVfNetdev> || std::is_same_v<S, MoveVfNetdev>
Result<std::optional<Inverse>> inverse(Context&, const S&) {
  return std::optional<Inverse>{};
}

Result<std::optional<Inverse>> inverse(Context&, const ClaimVf& s) {
  return Inverse{undo::VfRelease{{s.alloc.type, s.alloc.pci, s.alloc.container_id, s.alloc.ifname}}, false};
}
/// A restore_vf; the sysfs root is recorded only with a driver to rebind under it, and only when
/// it is not /sys (what a record without it means).
undo::VfRestore restore_vf(const undo::VfOwner& owner, const std::string& pf, std::vector<vf::VfSetting> settings,
                           const std::string& rebind_driver, const std::string& sysfs_root) {
  undo::VfRestore op;
  static_cast<undo::VfOwner&>(op) = owner;
  op.pf = pf;
  op.settings = std::move(settings);
  if (!rebind_driver.empty()) {
    op.rebind_driver = rebind_driver;
    if (sysfs_root != undo::kDefaultSysfsRoot) op.sysfs_root = sysfs_root;
  }
  return op;
}
Result<std::optional<Inverse>> inverse(Context&, const SetVfSettings& s) {
  return Inverse{restore_vf(s.owner, s.pf_netdev, s.restore, s.rebind_driver, s.sysfs_root), false};
}
Result<std::optional<Inverse>> inverse(Context&, const ReloadVfDriver& s) {
  return Inverse{restore_vf(s.owner, s.pf_netdev, {}, s.driver, s.sysfs_root), false};
}
Result<std::optional<Inverse>> inverse(Context&, const TakeVfNetdev& s) {
  undo::VfReturnNetdev op;
  static_cast<undo::VfOwner&>(op) = s.owner;
  op.name = s.orig.name;
  op.hwaddr = format_hwaddr(s.orig.hwaddr.data(), s.orig.hwaddr.size());
  op.mtu_bytes = s.orig.mtu_bytes;
  op.mac_changed = s.mac_changed;
  op.mtu_changed = s.mtu_changed;
  if (s.sysfs_root != undo::kDefaultSysfsRoot) op.sysfs_root = s.sysfs_root;
  return Inverse{std::move(op), false};
}
Result<std::optional<Inverse>> inverse(Context&, const MoveRdmaIntoPod& s) {
  undo::RdmaReturn op;
  static_cast<undo::VfOwner&>(op) = s.owner;
  op.device = s.device;
  return Inverse{std::move(op), false};
}
Result<std::optional<Inverse>> inverse(Context&, const CreateBridge& s) {
  return Inverse{undo::BridgeDelIfUnused{s.spec.name}, true};
}
Result<std::optional<Inverse>> inverse(Context&, const AddNodeAddress& s) {
  undo::AddrDel op{s.ifname, s.prefix, std::nullopt, std::nullopt};
  if (s.shared && !s.bridge.empty()) {
    op.bridge = s.bridge;
    op.port = s.port;
  }
  return Inverse{std::move(op), s.shared};
}
Result<std::optional<Inverse>> inverse(Context&, const RemoveNodeAddress& s) {
  return Inverse{undo::AddrRestore{s.ifname, s.prefix}, true};
}
Result<std::optional<Inverse>> inverse(Context&, const WriteNodeSysctl& s) {
  const std::string was = PLUMB_TRY(sysctl::read(s.key));
  if (was == s.value) return std::optional<Inverse>{};
  return Inverse{undo::SysctlRestore{s.key, was}, true};
}
Result<std::optional<Inverse>> inverse(Context&, const AddMacspoof& s) {
  return Inverse{undo::MacspoofDel{s.port, s.mac}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const AddMasquerade& s) {
  return Inverse{undo::MasqDel{s.pod}, false};
}

Result<std::optional<Inverse>> inverse(Context&, const AddPortMappings& s) {
  return Inverse{undo::PortmapRemove{s.mappings}, false};
}

Result<std::optional<Inverse>> inverse(Context&, const FlushConntrack&) { return std::optional<Inverse>{}; }
Result<std::optional<Inverse>> inverse(Context&, const CreatePodLink& s) {
  return Inverse{undo::LinkDel{"pod", s.ifname, s.group}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const WritePodSysctl&) { return std::optional<Inverse>{}; }
Result<std::optional<Inverse>> inverse(Context&, const CreatePodTap& s) {
  return Inverse{undo::LinkDel{"pod", s.spec.name, std::nullopt}, false};
}
Result<std::optional<Inverse>> inverse(Context&, const SetUpPodLink& s) {
  if (!s.change.name) return std::optional<Inverse>{};
  return Inverse{undo::LinkDel{"pod", *s.change.name, std::nullopt}, false};
}
Result<std::optional<Inverse>> inverse(Context& ctx, const TunePodLink& s) {
  undo::TuningRestore op;
  op.ifname = s.ifname;
  if (!s.sysctls.empty()) {
    auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
    for (const auto& [key, value] : s.sysctls) {
      auto was = sysctl::read(key);
      if (!was) return std::unexpected(was.error().within("sysctl \"" + key + "\""));
      op.sysctl[key] = *was;
    }
  }
  const link::LinkChange& ch = s.change;
  if (ch.mac || ch.mtu_bytes || ch.promisc || ch.allmulti || ch.txqlen) {
    auto l = PLUMB_TRY(link::get(*ctx.pod, s.index));
    if (!l) return fail(cni_code::kKernel, "interface " + s.ifname + " vanished");
    if (ch.mac && l->mac()) op.mac = *l->mac();
    if (ch.mtu_bytes) op.mtu_bytes = l->mtu_bytes;
    if (ch.promisc) op.promisc = (l->flags & IFF_PROMISC) != 0;
    if (ch.allmulti) op.allmulti = (l->flags & IFF_ALLMULTI) != 0;
    if (ch.txqlen) op.txqlen = l->txqlen;
  }
  return Inverse{std::move(op), false};
}

Status apply(Context& ctx, const CreateBridge& s) {
  auto st = link::create_bridge(*ctx.node, s.spec);
  if (!st && st.error().sys_errno != EEXIST) return st;
  return {};
}
Status apply(Context& ctx, const AddNodeAddress& s) {
  auto st = addr::add(*ctx.node, s.index, s.prefix, s.nodad);
  if (!st && st.error().sys_errno != EEXIST)
    return std::unexpected(st.error().within("add " + s.prefix.str() + " to " + s.ifname));
  return {};
}
Status apply(Context& ctx, const RemoveNodeAddress& s) {
  auto removed = addr::remove(*ctx.node, s.index, s.prefix);
  if (!removed) return std::unexpected(removed.error().within("remove " + s.prefix.str() + " from " + s.ifname));
  return {};
}
Status apply(Context&, const WriteNodeSysctl& s) { return sysctl::write(s.key, s.value); }
Status apply(Context&, const AddMacspoof& s) { return nft::add_macspoof(s.port, s.mac, s.owner); }
Status apply(Context&, const AddMasquerade& s) { return nft::add_masquerade(s.network, s.subnets, s.pod); }
Status apply(Context&, const AddPortMappings& s) { return nft::add_port_mappings(s.mappings); }
Status apply(Context&, const FlushConntrack& s) {
  auto flushed = nft::conntrack::remove_matching(s.filters);
  if (!flushed) return std::unexpected(flushed.error());
  return {};
}

Status create_link(netlink::Socket& nl, const std::string& ifname, const DummyLink&) {
  return link::create_dummy(nl, ifname);
}
Status create_link(netlink::Socket& nl, const std::string&, const link::MacvlanSpec& spec) {
  return link::create_macvlan(nl, spec);
}
Status create_link(netlink::Socket& nl, const std::string&, const link::IpvlanSpec& spec) {
  return link::create_ipvlan(nl, spec);
}
Status create_link(netlink::Socket& nl, const std::string&, const link::VlanSpec& spec) {
  return link::create_vlan(nl, spec);
}
Status apply(Context& ctx, const CreatePodLink& s) {
  netlink::Socket& nl = s.via_pod ? *ctx.pod : *ctx.node;
  return std::visit([&](const auto& spec) { return create_link(nl, s.ifname, spec); }, s.spec);
}
Status apply(Context& ctx, const WritePodSysctl& s) {
  auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
  return sysctl::write(s.key, s.value);
}
Status apply(Context& ctx, const CreatePodTap& s) {
  auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
  return s.selinux_context.empty() ? tun::create_tap(s.spec) : tun::create_tap_labelled(s.spec, s.selinux_context);
}
Status apply(Context& ctx, const SetUpPodLink& s) { return link::modify(*ctx.pod, s.index, s.change); }
Status apply(Context& ctx, const TunePodLink& s) {
  if (!s.sysctls.empty()) {
    auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
    for (const auto& [key, value] : s.sysctls) {
      auto st = sysctl::write(key, value);
      if (!st) return std::unexpected(st.error().within("sysctl \"" + key + "\""));
    }
  }
  const link::LinkChange& ch = s.change;
  if (ch.mac || ch.mtu_bytes || ch.promisc || ch.allmulti || ch.txqlen) PLUMB_TRY(link::modify(*ctx.pod, s.index, ch));
  return {};
}
netlink::Socket& socket_of(Context& ctx, Ns ns) { return ns == Ns::kPod ? *ctx.pod : *ctx.node; }
Status apply(Context& ctx, const SetUpNodeLink& s) { return link::modify(*ctx.node, s.index, s.change); }
Status apply(Context& ctx, const AddOwnLinkAddress& s) {
  auto st = addr::add(socket_of(ctx, s.ns), s.index, s.prefix, s.nodad);
  if (!st && !(s.exist_ok && st.error().sys_errno == EEXIST)) return st;
  return {};
}
Status apply(Context& ctx, const AddOwnLinkRoute& s) {
  auto st = route::add(socket_of(ctx, s.ns), s.route);
  if (!st && !(s.exist_ok && st.error().sys_errno == EEXIST)) return st;
  return {};
}
Status apply(Context& ctx, const RemoveOwnLinkRoute& s) {
  auto removed = route::remove(socket_of(ctx, s.ns), s.route);
  if (!removed) return std::unexpected(removed.error());
  return {};
}
Status apply(Context&, const WriteNodeLinkSysctl& s) { return sysctl::write(s.key, s.value); }
Status apply(Context& ctx, const EnableForwarding& s) {
  return netconf::ensure_forwarding(*ctx.node, s.family, ctx.node_watch);
}
Status apply(Context& ctx, const AddSourceRules& s) {
  for (const auto& r : s.rules) PLUMB_TRY(rule::add(*ctx.pod, r));
  return {};
}
Status apply(Context& ctx, const MoveLinkIntoPod& s) {
  link::LinkChange move;
  move.netns_fd = ctx.pod_ns->fd();
  move.name = s.ifname;  // renamed in the pod namespace after the move
  return link::modify(*ctx.node, s.dev.index, move);
}
Status apply(Context&, const AddFirewallPod& s) { return nft::firewall_add(s.pod); }
Status apply(Context&, const IsolateBridge& s) {
  return nft::firewall_isolate_bridge(s.bridge, s.isolated, nft::owner_tag(s.container_id, s.ifname));
}
Status apply(Context& ctx, const JoinPodVrf& s) {
  if (s.create_table) {
    auto st = link::create_vrf(*ctx.pod, s.vrf, *s.create_table);
    if (!st) return std::unexpected(st.error().within("create VRF " + s.vrf));
  }
  auto vrf = PLUMB_TRY(link::get(*ctx.pod, s.vrf));
  if (!vrf) return fail(cni_code::kKernel, "VRF " + s.vrf + " not found in the pod namespace");
  if (s.create_table) {
    link::LinkChange up;
    up.up = true;
    PLUMB_TRY(link::modify(*ctx.pod, vrf->index, up));
  }
  link::LinkChange enslave;
  enslave.master_index = vrf->index;
  auto st = link::modify(*ctx.pod, s.index, enslave);
  if (!st) return std::unexpected(st.error().within("could not set VRF " + s.vrf + " as master of " + s.ifname));
  return {};
}
Status apply(Context&, const WriteBandwidthEntries& s) {
  std::vector<plumb_bw_key> written;
  for (const auto& [key, limit] : s.entries) {
    auto st = s.progs->configure(key, limit, s.owner, s.exclusive);
    if (st) {
      written.push_back(key);
      continue;
    }
    for (const auto& k : written) (void)s.progs->remove(k, s.owner);
    return st;
  }
  return {};
}
Status apply(Context& ctx, const AddClsact& s) { return tc::add_clsact(socket_of(ctx, s.ns), s.index); }
Status apply(Context& ctx, const AttachShapingFilter& s) {
  return tc::attach(socket_of(ctx, s.ns), s.index, s.hook, s.prog_fd, s.prog_name, s.classid);
}
Status apply(Context& ctx, const SetRootFq& s) { return tc::set_root_fq(socket_of(ctx, s.ns), s.index); }

Status apply(Context& ctx, const SetUpBridge& s) { return link::modify(*ctx.node, s.index, s.change); }
Status apply(Context& ctx, const SetBridgePort& s) {
  if (s.hairpin) PLUMB_TRY(link::set_bridge_port_hairpin(*ctx.node, s.index, true));
  if (s.isolated) PLUMB_TRY(bridge_port::set_isolated(*ctx.node, s.index, true));
  return {};
}
Status apply(Context& ctx, const SetPortVlans& s) {
  for (uint16_t vid : s.remove) PLUMB_TRY(bridge_port::del_vlan(*ctx.node, s.index, vid));
  for (const auto& v : s.add) PLUMB_TRY(bridge_port::add_vlan(*ctx.node, s.index, v));
  return {};
}
Status apply(Context& ctx, const CreateSharedVeth& s) {
  auto made = link::create_veth(*ctx.node, s.spec);
  if (!made) return std::unexpected(made.error());
  return {};
}
Status apply(Context&, const ReclaimVf& s) {
  for (const auto& setting : s.stale.restore) {
    auto st = s.pf->set(s.stale.pf, setting);
    if (!st) {
      return std::unexpected(st.error().within("reclaim VF " + s.stale.pci + " from container " + s.stale.container_id +
                                               " whose netns " + s.stale.netns + " is gone"));
    }
  }
  return {};
}
Status apply(Context& ctx, const ClaimVf& s) { return vf_attach::write_allocation(ctx.state_dir, s.alloc); }
Status apply(Context&, const SetVfSettings& s) {
  for (const auto& setting : s.apply) {
    auto st = s.pf->set(s.pf_netdev, setting);
    if (!st) return std::unexpected(st.error().within("VF " + s.owner.pci));
  }
  if (s.rebind_now) PLUMB_TRY(pci::rebind(s.sysfs_root, s.owner.pci, s.rebind_driver));
  return {};
}
Status apply(Context&, const ReloadVfDriver& s) {
  auto st = pci::rebind(s.sysfs_root, s.owner.pci, s.driver);
  if (!st) return std::unexpected(st.error().within("reload driver " + s.driver + " of VF " + s.owner.pci));
  return {};
}
// Takes the netdev as it is: its state (up or down) is the VF's, which igb's PF reports (a VF
// netdev set down loses the MAC its PF lists), so a rollback before the move leaves it unchanged.
Status apply(Context&, const TakeVfNetdev&) { return {}; }
Status apply(Context& ctx, const ChangeVfNetdev& s) { return link::modify(*ctx.node, s.index, s.change); }
Status apply(Context& ctx, const MoveVfNetdev& s) {
  link::LinkChange move;
  move.name = ctx.ifname;
  move.netns_fd = ctx.pod_ns->fd();
  auto st = link::modify(*ctx.node, s.index, move);
  if (!st)
    return std::unexpected(st.error().within("move " + s.name + " into " + ctx.netns_path + " as " + ctx.ifname));
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l)
    return fail(cni_code::kKernel, s.name + " is not in " + ctx.netns_path + " as " + ctx.ifname + " after the move");
  link::LinkChange ch;
  if (s.mac && l->mac() != s.mac) ch.mac = *s.mac;
  if (s.mtu_bytes && l->mtu_bytes != *s.mtu_bytes) ch.mtu_bytes = *s.mtu_bytes;
  if (!ch.mac && !ch.mtu_bytes) return {};
  auto set = link::modify(*ctx.pod, l->index, ch);
  if (!set) return std::unexpected(set.error().within("set MAC/MTU of " + ctx.ifname));
  return {};
}
Status apply(Context& ctx, const MoveRdmaIntoPod& s) {
  auto node_ns = PLUMB_TRY(netns::Netns::current());
  return s.rdma->move(s.device, node_ns.fd(), ctx.pod_ns->fd());
}

Status apply_step(Context& ctx, const Step& step) {
  return std::visit([&](const auto& s) { return apply(ctx, s); }, step);
}

std::string call_name(const CreatePodVeth&) { return "create_pod_veth"; }
std::string call_name(const AllocateAddresses&) { return "allocate_addresses"; }
std::string call_name(const RunPlugin&) { return "run_plugin"; }

std::optional<Inverse> call_inverse(const Context&, const CreatePodVeth& c) {
  return Inverse{undo::LinkDel{"node", c.spec.host_name, std::nullopt}, false};
}
std::optional<Inverse> call_inverse(const Context& ctx, const AllocateAddresses& c) {
  if (c.announced || c.use == nullptr || !c.use->ipam) return std::nullopt;
  if (std::string type = c.use->ipam->delegated_type(); !type.empty()) {
    return Inverse{
        undo::DelegateDel{type, json::clone(*c.use->network_config), ctx.ifname, cni::delegate_args(ctx.cni_args)},
        false};
  }
  return Inverse{undo::IpamRelease{json::clone(*c.use->conf), ctx.network, ctx.ifname}, false};
}
std::optional<Inverse> call_inverse(const Context&, const RunPlugin& c) {
  return Inverse{undo::DelegateDel{c.del.type, json::clone(c.del.config), c.del.ifname, c.del.args}, false};
}

Result<Output> perform(Context& ctx, Executor&, const CreatePodVeth& c) {
  auto host = link::create_veth(*ctx.node, c.spec);
  if (!host) return std::unexpected(host.error());
  // The pod end read back: dropping this read made the ADD slower, not faster (the read runs the
  // pod end's pending link event at once, cheaper than what it costs later).
  if (!*host) *host = PLUMB_TRY(link::get(*ctx.node, c.spec.host_name));  // a kernel that echoes nothing
  auto pod = PLUMB_TRY(link::get(*ctx.pod, c.spec.peer_name));
  if (!*host || !pod) {
    return fail(cni_code::kKernel,
                "veth pair " + c.spec.host_name + "/" + c.spec.peer_name + " not found after creation");
  }
  return Output{PodVeth{std::move(**host), std::move(*pod)}};
}
Result<Output> perform(Context& ctx, Executor& exec, const AllocateAddresses& c) {
  ipam::Request req = c.req;
  if (!c.use->ipam->delegated_type().empty()) {
    req.on_delegate_started = [&ctx, &exec](const process::Child& child) { return exec.started(ctx, child); };
  }
  return Output{PLUMB_TRY(c.use->ipam->add(req))};
}
Result<Output> perform(Context& ctx, Executor& exec, const RunPlugin& c) {
  auto started = [&ctx, &exec](const process::Child& child) { return exec.started(ctx, child); };
  json::Document out = PLUMB_TRY(cni::exec_plugin(c.type, c.binary, c.inv, c.input, ctx.plugin_search, started));
  return Output{PLUMB_TRY(cni::decode_plugin_result(c.type, out, c.version))};
}
Result<Output> perform_call(Context& ctx, Executor& exec, const Call& call) {
  return std::visit([&](const auto& c) { return perform(ctx, exec, c); }, call);
}

/// The node link `ifname`'s index, or nullopt when it is gone.
Result<std::optional<int>> node_index(Context& ctx, const std::string& ifname) {
  if (ctx.node == nullptr) return std::optional<int>{};
  auto l = PLUMB_TRY(link::get(*ctx.node, ifname));
  if (!l) return std::optional<int>{};
  return std::optional<int>(l->index);
}

/// Whether node bridge `bridge` has a port other than `own` (false when the bridge is gone).
Result<bool> has_other_port(Context& ctx, const std::string& bridge, const std::string& own) {
  if (ctx.node == nullptr) return false;
  auto br = PLUMB_TRY(link::get(*ctx.node, bridge));
  if (!br) return false;
  auto links = PLUMB_TRY(link::list(*ctx.node));
  return std::any_of(links.begin(), links.end(),
                     [&](const link::LinkInfo& l) { return l.master_index == br->index && l.name != own; });
}

}  // namespace

std::string name_of(const Step& step) {
  return std::visit([](const auto& s) { return step_name(s); }, step);
}

Result<std::optional<Inverse>> inverse_of(Context& ctx, const Step& step) {
  return std::visit([&](const auto& s) { return inverse(ctx, s); }, step);
}

std::string name_of(const Call& call) {
  return std::visit([](const auto& c) { return call_name(c); }, call);
}

std::optional<Inverse> inverse_of(const Context& ctx, const Call& call) {
  return std::visit([&](const auto& c) { return call_inverse(ctx, c); }, call);
}

Status JournalExecutor::make(Context& ctx, const Step& step, std::optional<Inverse> inv) {
  if (inv) PLUMB_TRY(undo::will(ctx, std::move(inv->op), inv->rollback_only));
  return apply_step(ctx, step);
}

Result<Output> JournalExecutor::make(Context& ctx, const Call& call, std::optional<Inverse> inv) {
  if (inv) {
    PLUMB_TRY(undo::will(ctx, std::move(inv->op), inv->rollback_only));
  } else if (ctx.journal != nullptr) {
    PLUMB_TRY(ctx.journal->flush());  // what announce() registered (written with the link's already: no write)
  }
  return perform_call(ctx, *this, call);
}

bool JournalExecutor::announce(Context& ctx, Inverse inv) { return undo::will_later(ctx, std::move(inv.op)); }

Status JournalExecutor::started(Context& ctx, const process::Child& child) {
  return undo::will(ctx, undo::DelegateEndProcess{child.pid, child.start_time});
}

Status RecordingExecutor::make(Context& ctx, const Step& step, std::optional<Inverse> inv) {
  made_.push_back({name_of(step), std::move(inv)});
  return apply_ ? apply_step(ctx, step) : Status{};
}

Result<Output> RecordingExecutor::make(Context& ctx, const Call& call, std::optional<Inverse> inv) {
  made_.push_back({name_of(call), std::move(inv)});
  if (apply_) return perform_call(ctx, *this, call);
  if (std::holds_alternative<CreatePodVeth>(call)) return Output{PodVeth{}};
  return Output{answer};
}

bool RecordingExecutor::announce(Context&, Inverse inv) {
  made_.push_back({"announce", std::move(inv)});
  return true;
}

Status RecordingExecutor::started(Context&, const process::Child& child) {
  made_.push_back({"started_process", Inverse{undo::DelegateEndProcess{child.pid, child.start_time}, false}});
  return {};
}

Status run(Context& ctx, const Step& step) {
  auto inv = PLUMB_TRY(inverse_of(ctx, step));
  if (ctx.executor != nullptr) return ctx.executor->make(ctx, step, std::move(inv));
  JournalExecutor journal;
  return journal.make(ctx, step, std::move(inv));
}

Result<Output> call_any(Context& ctx, const Call& call) {
  JournalExecutor journal;
  Executor& exec = ctx.executor != nullptr ? *ctx.executor : journal;
  if (std::holds_alternative<RunPlugin>(call)) exec.made_veths().clear();
  auto out = exec.make(ctx, call, inverse_of(ctx, call));
  if (out && std::holds_alternative<CreatePodVeth>(call)) {
    exec.made_veths()[std::get<CreatePodVeth>(call).spec.peer_name] = std::get<PodVeth>(*out);
  }
  return out;
}

bool announce(Context& ctx, const Call& call) {
  auto inv = inverse_of(ctx, call);
  if (!inv) return false;
  if (ctx.executor != nullptr) return ctx.executor->announce(ctx, std::move(*inv));
  JournalExecutor journal;
  return journal.announce(ctx, std::move(*inv));
}

}  // namespace plumb::drivers::steps

namespace plumb::drivers::undo {

Status run_op(Context& ctx, const AddrDel& op) {
  if (op.bridge && PLUMB_TRY(steps::has_other_port(ctx, *op.bridge, op.port.value_or("")))) return {};
  auto index = PLUMB_TRY(steps::node_index(ctx, op.ifname));
  if (!index) return {};
  auto removed = addr::remove(*ctx.node, *index, op.prefix);
  if (!removed)
    return std::unexpected(removed.error().within("undo: remove " + op.prefix.str() + " from " + op.ifname));
  return {};
}

Status run_op(Context& ctx, const AddrRestore& op) {
  auto index = PLUMB_TRY(steps::node_index(ctx, op.ifname));
  if (!index) return {};
  auto st = addr::add(*ctx.node, *index, op.prefix, /*nodad=*/true);
  if (!st && st.error().sys_errno != EEXIST)
    return std::unexpected(st.error().within("undo: put " + op.prefix.str() + " back on " + op.ifname));
  return {};
}

Status run_op(Context&, const SysctlRestore& op) {
  auto st = sysctl::write(op.key, op.value);
  if (!st && st.error().sys_errno == ENOENT) return {};  // its interface is gone
  if (!st) return std::unexpected(st.error().within("undo: restore " + op.key));
  return {};
}

}  // namespace plumb::drivers::undo
