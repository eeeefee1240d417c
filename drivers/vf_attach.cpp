// Shared steps of the VF drivers, not a driver (see vf_attach.hpp), and the executors of the VF
// undo operations.
#include "drivers/vf_attach.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/file.hpp"
#include "engine/base/netns.hpp"
#include "engine/devinfo/devinfo.hpp"

namespace plumb::drivers::vf_attach {
namespace {

constexpr const char* kAllocDir = "sriov";

/// <state_dir>/sriov, opened (created 0700 with `create`) relative to the state directory and
/// never through a link. Errors: kNotFound when missing and not created; kIo naming the path.
Result<Dir> alloc_dir(const std::string& state_dir, bool create) {
  if (state_dir.empty()) return fail(cni_code::kInternal, "SR-IOV: no state directory to keep VF allocations in");
  const std::optional<mode_t> mode = create ? std::optional<mode_t>(0700) : std::nullopt;
  auto root = Dir::open(state_dir, mode);
  auto dir = root ? root->sub(kAllocDir, mode) : std::move(root);
  if (!dir && dir.error().cni_code != cni_code::kNotFound) return std::unexpected(dir.error().within("VF allocation directory"));
  return dir;
}

bool netns_alive(const std::string& path) { return !path.empty() && netns::Netns::open(path).has_value(); }

/// The lock of VF `pci`'s allocation record (creating the allocation directory).
Result<state::FileLock> lock_vf(const Context& ctx, const std::string& pci) {
  return state::lock_file(std::make_shared<const Dir>(PLUMB_TRY(alloc_dir(ctx.state_dir, true))), pci + ".lock");
}

/// True when the VF of `op` is now allocated to another container or interface.
Result<bool> owned_by_other(const Context& ctx, const undo::VfOwner& op) {
  auto a = PLUMB_TRY(read_allocation(ctx.state_dir, op.pci));
  return a && (a->container_id != op.container_id || a->ifname != op.ifname);
}

}  // namespace

Result<std::optional<Allocation>> read_allocation(const std::string& state_dir, const std::string& pci) {
  auto dir = alloc_dir(state_dir, false);
  if (!dir && dir.error().cni_code == cni_code::kNotFound) return std::optional<Allocation>{};
  if (!dir) return std::unexpected(dir.error());
  auto text = dir->read(pci, "VF allocation", 1u << 20);
  if (!text && text.error().cni_code == cni_code::kNotFound) return std::optional<Allocation>{};
  if (!text) return std::unexpected(text.error());
  const std::string where = "VF allocation " + dir->path_of(pci);
  auto doc = PLUMB_TRY(json::parse(*text, where));
  Allocation a;
  a.pci = pci;
  a.type = PLUMB_TRY(json::get_string(doc, "type", where)).value_or("");
  a.container_id = PLUMB_TRY(json::get_string(doc, "containerID", where)).value_or("");
  a.ifname = PLUMB_TRY(json::get_string(doc, "ifname", where)).value_or("");
  a.netns = PLUMB_TRY(json::get_string(doc, "netns", where)).value_or("");
  a.mode = PLUMB_TRY(json::get_string(doc, "mode", where)).value_or("");
  a.pf = PLUMB_TRY(json::get_string(doc, "pf", where)).value_or("");
  if (const json::Value* r = PLUMB_TRY(json::get_array(doc, "restore", where))) {
    for (auto& s : r->GetArray()) a.restore.push_back(PLUMB_TRY(vf::VfSetting::from_json(s)));
  }
  return std::optional<Allocation>(std::move(a));
}

Status write_allocation(const std::string& state_dir, const Allocation& al) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::set_string(d, "pci", al.pci, a);
  json::set_string(d, "type", al.type, a);
  json::set_string(d, "containerID", al.container_id, a);
  json::set_string(d, "ifname", al.ifname, a);
  json::set_string(d, "netns", al.netns, a);
  json::set_string(d, "mode", al.mode, a);
  json::set_string(d, "pf", al.pf, a);
  json::Value r(rapidjson::kArrayType);
  for (auto& s : al.restore) r.PushBack(s.to_json(a), a);
  d.AddMember("restore", r, a);
  return PLUMB_TRY(alloc_dir(state_dir, true)).write_atomic(al.pci, json::dump(d));
}

DefaultBackends::DefaultBackends(Context& ctx) : pf(*ctx.node), backends{&pf, &rdma, &vdpa} {}

namespace {
std::atomic<Backends*> overridden{nullptr};
}  // namespace

BackendsOverride::BackendsOverride(Backends& b) : previous_(overridden.exchange(&b)) {}
BackendsOverride::~BackendsOverride() { overridden.store(previous_); }

Backends& backends_of(DefaultBackends& defaults) {
  Backends* b = overridden.load();
  return b != nullptr ? *b : defaults.backends;
}

Result<std::string> device_id(const json::Value& conf, const ParseInput& in, std::string_view type) {
  const std::string& where = in.network;
  // The deviceID names files (sysfs, allocation records): only a well-formed PCI address passes.
  auto checked = [](const std::string& id, const std::string& at) -> Result<std::string> {
    if (!pci::valid_pci_address(id)) {
      return fail(cni_code::kInvalidConfig, at + ".deviceID \"" + id + "\" is not a PCI address (dddd:bb:dd.f)");
    }
    return id;
  };
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto id = PLUMB_TRY(json::get_string(*rc, "deviceID", where + ".runtimeConfig", true)); id && !id->empty()) {
      return checked(*id, where + ".runtimeConfig");
    }
  }
  if (auto id = PLUMB_TRY(json::get_string(conf, "deviceID", where)); id && !id->empty()) return checked(*id, where);
  return fail(
      cni_code::kInvalidConfig,
      "network " + in.network + " (type " + std::string(type) +
          ") has no device: annotate its NetworkAttachmentDefinition with k8s.v1.cni.cncf.io/resourceName (plumb "
          "then asks kubelet which device the pod was allocated), or set \"deviceID\" (the VF's PCI address) in its "
          "config, or have the runtime pass runtimeConfig.deviceID");
}

Result<std::optional<vf::LinkState>> parse_link_state(const json::Value& conf, const std::string& where) {
  auto ls = PLUMB_TRY(json::get_string(conf, "link_state", where));
  if (!ls) return std::optional<vf::LinkState>{};
  if (*ls == "auto") return std::optional(vf::LinkState::Auto);
  if (*ls == "enable") return std::optional(vf::LinkState::Enable);
  if (*ls == "disable") return std::optional(vf::LinkState::Disable);
  return fail(cni_code::kInvalidConfig,
              where + ".link_state \"" + *ls + "\" must be \"auto\", \"enable\" or \"disable\"");
}

Status ensure_ifname_free(Context& ctx) {
  if (ctx.pod == nullptr) return fail(cni_code::kInvalidEnv, "ADD needs the pod namespace");
  if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
    return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
  }
  return {};
}

namespace {
/// The VF operations' owner: this attachment, as driver `type`, of VF `pci`.
undo::VfOwner owner_of(const Context& ctx, std::string_view type, const std::string& pci) {
  return {std::string(type), pci, ctx.container_id, ctx.ifname};
}
}  // namespace

Result<Claim> claim(Context& ctx, Backends& b, std::string_view type, const pci::VfDevice& dev,
                    const std::string& mode) {
  Claim cl;
  cl.lock = PLUMB_TRY(lock_vf(ctx, dev.pci));
  auto existing = PLUMB_TRY(read_allocation(ctx.state_dir, dev.pci));
  if (existing && !(existing->container_id == ctx.container_id && existing->ifname == ctx.ifname)) {
    if (netns_alive(existing->netns)) {
      return fail(cni_code::kConflict, "VF " + dev.pci + " is already allocated to container " +
                                           existing->container_id + " (interface " + existing->ifname + ", netns " +
                                           existing->netns + ")");
    }
    // Stale: its pod namespace is gone. Put back the PF settings it changed, then take it over.
    if (!existing->restore.empty() && b.pf == nullptr)
      return fail(cni_code::kInternal, "reclaim VF " + dev.pci + ": no PF backend");
    if (!existing->restore.empty()) PLUMB_TRY(steps::run(ctx, steps::ReclaimVf{b.pf, *existing}));
  }
  cl.alloc.pci = dev.pci;
  cl.alloc.type = std::string(type);
  cl.alloc.container_id = ctx.container_id;
  cl.alloc.ifname = ctx.ifname;
  cl.alloc.netns = ctx.netns_path;
  cl.alloc.mode = mode;
  PLUMB_TRY(steps::run(ctx, steps::ClaimVf{cl.alloc}));
  return cl;
}

Status apply_pf_settings(Context& ctx, Backends& b, Claim& cl, std::string_view type, const std::string& pf,
                         const std::vector<vf::VfSetting>& apply, const std::vector<vf::VfSetting>& restore,
                         const std::string& rebind_driver, bool rebind_now) {
  if (b.pf == nullptr) return fail(cni_code::kInternal, "no PF backend");
  cl.alloc.pf = pf;
  cl.alloc.restore = restore;
  PLUMB_TRY(write_allocation(ctx.state_dir, cl.alloc));
  steps::SetVfSettings step;
  step.pf = b.pf;
  step.owner = owner_of(ctx, type, cl.alloc.pci);
  step.pf_netdev = pf;
  step.apply = apply;
  step.restore = restore;
  step.rebind_driver = rebind_driver;
  step.rebind_now = rebind_now;
  step.sysfs_root = ctx.sysfs_root;
  return steps::run(ctx, step);
}

Result<NetdevOrig> register_return_netdev(Context& ctx, std::string_view type, const std::string& pci,
                                          const std::string& name, bool mac_change, bool mtu_change) {
  auto l = PLUMB_TRY(link::get(*ctx.node, name));
  if (!l) {
    return fail(cni_code::kNotFound,
                "the netdev " + name + " of device " + pci + " (from sysfs) is not in the node namespace");
  }
  NetdevOrig o{l->index, l->name, l->hwaddr, l->mtu_bytes};
  PLUMB_TRY(steps::run(ctx, steps::TakeVfNetdev{owner_of(ctx, type, pci), o, mac_change, mtu_change, ctx.sysfs_root}));
  return o;
}

Status take_pf_mac(Context& ctx, const pci::VfDevice& dev, NetdevOrig& orig, const Mac& mac) {
  auto l = PLUMB_TRY(link::get(*ctx.node, orig.name));
  if (!l) return fail(cni_code::kNotFound, "the netdev " + orig.name + " of VF " + dev.pci + " left the node");
  if (l->mac() == mac) return {};
  steps::ChangeVfNetdev set_mac{l->index, {}};
  set_mac.change.mac = mac;
  auto set = steps::run(ctx, set_mac);
  if (set) return {};
  if (set.error().sys_errno != EADDRNOTAVAIL || dev.driver.empty()) {
    return std::unexpected(set.error().within("set MAC " + mac.str() + " on VF netdev " + orig.name));
  }
  const std::string what = "reload driver " + dev.driver + " of VF " + dev.pci + " so it takes MAC " + mac.str();
  PLUMB_TRY(steps::run(
      ctx, steps::ReloadVfDriver{owner_of(ctx, "sriov", dev.pci), dev.pf_netdev, dev.driver, ctx.sysfs_root}));
  auto again = PLUMB_TRY(pci::lookup_device(ctx.sysfs_root, dev.pci, false, what));
  std::optional<link::LinkInfo> now;
  if (!again.netdev.empty()) now = PLUMB_TRY(link::get(*ctx.node, again.netdev));
  if (!now) return fail(cni_code::kNotFound, what + ": the VF has no netdev in the node after it");
  if (now->name != orig.name) {
    steps::ChangeVfNetdev rename{now->index, {}};
    rename.change.name = orig.name;
    auto r = steps::run(ctx, rename);
    if (!r) return std::unexpected(r.error().within(what + ": rename " + now->name + " back to " + orig.name));
  }
  orig.index = now->index;
  return {};
}

Result<link::LinkInfo> move_netdev(Context& ctx, const NetdevOrig& orig, const std::optional<Mac>& mac,
                                   const std::optional<uint32_t>& mtu_bytes) {
  PLUMB_TRY(steps::run(ctx, steps::MoveVfNetdev{orig.index, orig.name, mac, mtu_bytes}));
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l) return fail(cni_code::kKernel, ctx.ifname + " vanished from " + ctx.netns_path);
  return *l;
}

Status move_rdma(Context& ctx, Backends& b, std::string_view type, const std::string& pci, const std::string& device) {
  if (b.rdma == nullptr) return fail(cni_code::kInternal, std::string(type) + ": no RDMA backend");
  return steps::run(ctx, steps::MoveRdmaIntoPod{b.rdma, owner_of(ctx, type, pci), device});
}

Result<cni::CniResult> pod_result(Context& ctx, const IpamUse& ipam, const std::string& pci,
                                  const link::LinkInfo* moved, const std::string& mac) {
  cni::CniResult r = PLUMB_TRY(run_ipam(ctx, ipam));
  if (moved != nullptr) {
    r.interfaces = {{ctx.ifname, format_hwaddr(moved->hwaddr.data(), moved->hwaddr.size()), moved->mtu_bytes,
                     ctx.netns_path, "", pci}};
  } else {
    r.interfaces = {{ctx.ifname, mac, std::nullopt, ctx.netns_path, "", pci}};
  }
  for (auto& ip : r.ips) ip.interface = 0;
  if (moved != nullptr) {
    PLUMB_TRY(configure_pod_interface(ctx, moved->index, r, false));
    // The VF's MAC now owns these addresses: tell the switch and neighbours, and let the kernel
    // repeat it on later link flaps (sriov-cni does both; best effort).
    // arp_notify and ndisc_notify (announce::enable_notify), as steps.
    if (ctx.pod_ns != nullptr &&
        steps::run(ctx, steps::WritePodSysctl{"net/ipv4/conf/" + ctx.ifname + "/arp_notify", "1"}))
      (void)steps::run(ctx, steps::WritePodSysctl{"net/ipv6/conf/" + ctx.ifname + "/ndisc_notify", "1"});
    if (auto m = moved->mac()) announce_addresses(ctx, moved->index, *m, r, std::chrono::milliseconds(200), true);
  }
  return r;
}

Status complete_device_info(const Context& ctx, const json::Value& info) {
  if (ctx.device_info_file.empty()) return {};
  return devinfo::complete(ctx.device_info_file, info);
}

Result<cni::CniResult> finish_pci_vf(Context& ctx, const IpamUse& ipam, const pci::VfDevice& dev,
                                     const link::LinkInfo* moved, const std::string& mac) {
  cni::CniResult r = PLUMB_TRY(pod_result(ctx, ipam, dev.pci, moved, mac));
  devinfo::PciInfo info;
  info.pci_address = dev.pci;
  info.pf_pci_address = dev.pf_pci;
  info.rdma_device = dev.rdma_device;
  PLUMB_TRY(complete_device_info(ctx, devinfo::make_pci(info)));
  return r;
}

Status check_attachment(Context& ctx, const std::string& pci) {
  auto a = PLUMB_TRY(read_allocation(ctx.state_dir, pci));
  if (!a || a->container_id != ctx.container_id || a->ifname != ctx.ifname) {
    return fail(cni_code::kKernel, "CHECK: VF " + pci + " is not allocated to " + ctx.container_id + "/" + ctx.ifname);
  }
  if (a->mode == "netdev" || a->mode == "virtio") {
    auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
    if (!l) return fail(cni_code::kKernel, "CHECK: interface " + ctx.ifname + " not found in " + ctx.netns_path);
    if (!l->up()) return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is down");
  }
  return {};
}

}  // namespace plumb::drivers::vf_attach

// --- the VF undo operations (drivers/undo.hpp) --------------------------------------------------

namespace plumb::drivers::undo {

using vf_attach::Backends;
using vf_attach::DefaultBackends;

namespace {

/// The VF `pci`'s netdev in the node under another name than `name` (its driver was reloaded,
/// which gave it a new netdev), renamed back to `name`; nullopt when it has none in the node.
Result<std::optional<link::LinkInfo>> renamed_netdev(Context& ctx, const std::string& sysfs_root,
                                                     const std::string& pci, const std::string& name) {
  auto dev = pci::lookup_device(sysfs_root, pci, false, "VF " + pci);
  if (!dev || dev->netdev.empty() || dev->netdev == name) return std::optional<link::LinkInfo>{};
  auto l = PLUMB_TRY(link::get(*ctx.node, dev->netdev));
  if (!l) return l;
  link::LinkChange rename;
  rename.name = name;
  auto st = link::modify(*ctx.node, l->index, rename);
  if (!st)
    return std::unexpected(st.error().within("undo: rename VF " + pci + "'s netdev " + l->name + " back to " + name));
  return link::get(*ctx.node, name);
}

/// Prepares VF netdev `l`, which already carries `mac`, to set `mac` again so its driver tells the
/// PF: a VF whose administrative MAC was just removed (igb clears the VF's filter entry with it)
/// has its own MAC back in the PF's filter only when it sets it, and the kernel skips a set to the
/// netdev's current MAC (since 6.5), so the netdev first takes `mac` with its last bit flipped.
/// A VF driver that refuses that (EADDRNOTAVAIL: an administrative MAC still governs the VF) has
/// nothing to re-register. Errors: the kernel's, within `what`.
Status reregister_mac(Context& ctx, const link::LinkInfo& l, const Mac& mac, const std::string& what) {
  link::LinkChange other;
  other.mac = mac;
  other.mac->bytes[5] ^= 0x01;
  auto st = link::modify(*ctx.node, l.index, other);
  if (!st && st.error().sys_errno != EADDRNOTAVAIL)
    return std::unexpected(
        st.error().within(what + " (set MAC " + other.mac->str() + " before setting " + mac.str() + " again)"));
  return {};
}

}  // namespace

Status run_op(Context& ctx, const VfRelease& op) {
  auto lock = PLUMB_TRY(vf_attach::lock_vf(ctx, op.pci));
  if (PLUMB_TRY(vf_attach::owned_by_other(ctx, op))) return {};
  auto dir = PLUMB_TRY(vf_attach::alloc_dir(ctx.state_dir, true));
  auto st = dir.remove(op.pci);
  if (!st) return std::unexpected(st.error().within("undo: release VF " + op.pci));
  return {};
}

Status run_op(Context& ctx, const VfRestore& op) {
  auto lock = PLUMB_TRY(vf_attach::lock_vf(ctx, op.pci));
  if (PLUMB_TRY(vf_attach::owned_by_other(ctx, op))) return {};
  DefaultBackends defaults(ctx);
  Backends& b = vf_attach::backends_of(defaults);
  for (const auto& s : op.settings) {
    auto st = b.pf->set(op.pf, s);
    if (!st && st.error().cni_code == cni_code::kNotFound) return {};  // the PF is gone, and its VFs with it
    // A setting the PF's driver does not support (EOPNOTSUPP) was never changed: nothing to restore.
    if (!st && st.error().cni_code == cni_code::kKernelFeature) continue;
    if (!st) return std::unexpected(st.error().within("undo: restore the saved settings of VF " + op.pci));
  }
  if (op.rebind_driver && !op.rebind_driver->empty())
    PLUMB_TRY(pci::rebind(op.sysfs_root.value_or(std::string(kDefaultSysfsRoot)), op.pci, *op.rebind_driver));
  return {};
}

Status run_op(Context& ctx, const VfReturnNetdev& op) {
  auto lock = PLUMB_TRY(vf_attach::lock_vf(ctx, op.pci));
  if (PLUMB_TRY(vf_attach::owned_by_other(ctx, op))) return {};
  // "" for a netdev without hardware address.
  auto hwaddr = op.hwaddr.empty() ? std::optional<std::vector<uint8_t>>(std::in_place) : parse_hwaddr(op.hwaddr);
  if (!hwaddr) return fail(cni_code::kDecode, "bad hardware address \"" + op.hwaddr + "\" in an undo operation");
  const std::string what = "undo: return the VF netdev " + op.ifname + " to the node as " + op.name;
  if (ctx.pod != nullptr) {
    auto in_pod = PLUMB_TRY(link::get(*ctx.pod, op.ifname));
    if (!in_pod) in_pod = PLUMB_TRY(link::get(*ctx.pod, op.name));  // moved, but the rename failed
    if (in_pod) {
      auto node_ns = netns::Netns::current();
      if (!node_ns) return std::unexpected(node_ns.error().within(what));
      link::LinkChange back;
      back.up = false;
      back.name = op.name;
      back.netns_fd = node_ns->fd();
      auto st = link::modify(*ctx.pod, in_pod->index, back);
      if (!st) return std::unexpected(st.error().within(what));
    }
  }
  // In the node (just returned, or never moved): give back the original MAC and MTU.
  auto l = PLUMB_TRY(link::get(*ctx.node, op.name));
  if (!l) l = PLUMB_TRY(renamed_netdev(ctx, op.sysfs_root.value_or(std::string(kDefaultSysfsRoot)), op.pci, op.name));
  if (!l) return {};  // pod namespace gone: a real VF netdev went back to the initial namespace
  link::LinkChange ch;
  if (op.mac_changed && hwaddr->size() == 6) {
    Mac m;
    std::copy(hwaddr->begin(), hwaddr->end(), m.bytes.begin());
    ch.mac = m;
    if (l->hwaddr == *hwaddr) PLUMB_TRY(reregister_mac(ctx, *l, m, what));
  }
  if (op.mtu_changed && op.mtu_bytes != 0 && l->mtu_bytes != op.mtu_bytes) ch.mtu_bytes = op.mtu_bytes;
  if (ch.mac || ch.mtu_bytes) {
    auto st = link::modify(*ctx.node, l->index, ch);
    if (!st) return std::unexpected(st.error().within(what + " (restore MAC/MTU)"));
  }
  return {};
}

Status run_op(Context& ctx, const RdmaReturn& op) {
  auto lock = PLUMB_TRY(vf_attach::lock_vf(ctx, op.pci));
  if (PLUMB_TRY(vf_attach::owned_by_other(ctx, op))) return {};
  if (ctx.pod_ns == nullptr) return {};  // the kernel returns RDMA devices when their namespace dies
  DefaultBackends defaults(ctx);
  Backends& b = vf_attach::backends_of(defaults);
  auto node_ns = netns::Netns::current();
  if (!node_ns) return std::unexpected(node_ns.error().within("undo: return RDMA device " + op.device));
  auto st = b.rdma->move(op.device, ctx.pod_ns->fd(), node_ns->fd());
  if (!st && st.error().cni_code == cni_code::kNotFound) return {};  // not in the pod (never moved, or back)
  if (!st) return std::unexpected(st.error().within("undo: return RDMA device " + op.device + " to the node"));
  return {};
}

}  // namespace plumb::drivers::undo
