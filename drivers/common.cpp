// Pieces every driver shares: parsing the shared keys (ipam, mac, mtu), running IPAM, configuring
// the pod interface, the shared CHECK helpers and the shared undo operations.
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "drivers/driver.hpp"
#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/netns.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/announce.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/nft/nft.hpp"

namespace plumb::drivers {
namespace {

std::shared_ptr<const json::Document> copy_member(const json::Value& conf, std::string_view key) {
  const json::Value* v = json::find(conf, key);
  if (v == nullptr || !v->IsObject()) return nullptr;
  return std::make_shared<const json::Document>(json::clone(*v));
}

}  // namespace

Result<IpamUse> parse_ipam(const json::Value& conf, const ParseInput& in) {
  const json::Value* ipam_conf = PLUMB_TRY(json::get_object(conf, "ipam", in.network));
  if (ipam_conf == nullptr || json::find(*ipam_conf, "type") == nullptr) return IpamUse{};
  PLUMB_TRY(json::get_object(conf, "runtimeConfig", in.network));
  PLUMB_TRY(json::get_object(conf, "args", in.network));
  IpamUse use;
  auto made = ipam::make(*ipam_conf, in.plugin_search.dirs.empty() ? nullptr : &in.plugin_search, &in.ipam_cluster);
  if (!made) return std::unexpected(made.error().within("network " + in.network));
  use.ipam = std::shared_ptr<ipam::Ipam>(std::move(*made));
  use.conf = std::make_shared<const json::Document>(json::clone(*ipam_conf));
  use.runtime_config = copy_member(conf, "runtimeConfig");
  use.args = copy_member(conf, "args");
  if (!use.ipam->delegated_type().empty()) {
    auto whole = std::make_shared<json::Document>(json::clone(conf));
    whole->RemoveMember("prevResult");
    use.network_config = std::move(whole);
  }
  return use;
}

Result<cni::Dns> parse_dns(const json::Value& conf, const std::string& network) {
  cni::Dns d;
  const json::Value* dns = PLUMB_TRY(json::get_object(conf, "dns", network));
  if (dns == nullptr) return d;
  const std::string where = network + ".dns";
  d.nameservers = PLUMB_TRY(json::get_string_array(*dns, "nameservers", where)).value_or(std::vector<std::string>{});
  d.domain = PLUMB_TRY(json::get_string(*dns, "domain", where)).value_or("");
  d.search = PLUMB_TRY(json::get_string_array(*dns, "search", where)).value_or(std::vector<std::string>{});
  d.options = PLUMB_TRY(json::get_string_array(*dns, "options", where)).value_or(std::vector<std::string>{});
  return d;
}

void apply_config_dns(cni::CniResult& r, const cni::Dns& dns, bool always) {
  if (always || !dns.empty()) r.dns = dns;
}

Result<ParsedPlugin> parse_plugin(const json::Value& conf, const ParseInput& in) {
  if (!conf.IsObject()) return fail(cni_code::kInvalidConfig, "network " + in.network + ": a plugin entry is not an object");
  auto type = PLUMB_TRY(json::get_string(conf, "type", in.network + " plugin"));
  if (!type || type->empty()) return fail(cni_code::kInvalidConfig, "network " + in.network + ": a plugin has no \"type\"");
  const Driver* d = find(*type);
  if (d == nullptr && !in.plugin_search.dirs.empty()) d = &kDelegate;  // CNI SPEC: executed from binDir/CNI_PATH
  if (d == nullptr) {
    return fail(cni_code::kInvalidConfig, "network " + in.network + ": plugin type \"" + *type +
                                              "\" is not implemented by plumb (it implements " + known_types() + ")");
  }
  return ParsedPlugin{d, PLUMB_TRY(d->parse(conf, in))};
}

bool ipam_release_ahead(Context& ctx, const IpamUse& use) {
  if (!use.ipam || !use.ipam->delegated_type().empty()) return false;
  return steps::announce(ctx, steps::AllocateAddresses{&use, {}, false});
}

Result<cni::CniResult> run_ipam(Context& ctx, const IpamUse& use, bool release_registered) {
  if (!use.ipam) return cni::CniResult{};
  ipam::Request req;
  if (!use.ipam->delegated_type().empty()) {
    // CNI IPAM delegation: the IPAM gets the whole plugin config; its DEL is the call's inverse,
    // its process reported once started (a killed ADD leaves no IPAM still running).
    req.network_config = use.network_config.get();
    req.netns = ctx.netns_path;
  }
  req.container_id = ctx.container_id;
  req.ifname = ctx.ifname;
  req.network_name = ctx.network;
  req.ipam = use.conf.get();
  req.runtime_config = use.runtime_config.get();
  req.args = use.args.get();
  req.cni_args = ctx.cni_args;
  req.owner = ctx.ipam_owner;
  req.owner_ips = ctx.ipam_owner_ips;
  // The attachment's record was just started (an earlier ADD's remains are torn down before a
  // new one runs), so container+ifname holds nothing of this network: no look-up needed.
  req.first_allocation = true;
  return steps::call(ctx, steps::AllocateAddresses{&use, std::move(req), release_registered});
}

Status enable_arp_notify(Context& ctx, int index) {
  link::LinkChange notify;
  notify.arp_notify = true;
  auto st = steps::run(ctx, steps::SetUpPodLink{index, notify});
  if (!st) return std::unexpected(st.error().within(ctx.network + ": set net.ipv4.conf." + ctx.ifname + ".arp_notify"));
  return {};
}

namespace {

/// Adds `prefix` to the pod interface `index`. Where IPv6 is disabled on it (the kernel's
/// EACCES, a namespace whose defaults have disable_ipv6 = 1), IPv6 is enabled on lo and the
/// interface first, as the reference's ipam.ConfigureIface does (looked at only on that error:
/// /proc/sys/net/ipv6 look-ups grow with the node's namespaces, netconf.hpp).
Status add_pod_address(Context& ctx, int index, const IpPrefix& prefix, bool nodad) {
  const steps::AddOwnLinkAddress add{steps::Ns::kPod, index, prefix, nodad, /*exist_ok=*/false};
  auto st = steps::run(ctx, add);
  if (!st && st.error().sys_errno == EACCES && !prefix.addr.is_v4() && ctx.pod_ns != nullptr) {
    auto itf = PLUMB_TRY(link::get(*ctx.pod, index));
    if (!itf) return fail(cni_code::kKernel, "pod interface index " + std::to_string(index) + " is gone");
    for (const std::string& dev : {std::string("lo"), itf->name}) {
      PLUMB_TRY(steps::run(ctx, steps::WritePodSysctl{"net/ipv6/conf/" + dev + "/disable_ipv6", "0"}));
    }
    st = steps::run(ctx, add);
  }
  if (!st) return std::unexpected(st.error().within("add address " + prefix.str()));
  return {};
}

/// configure_pod_interface, with the answer about the link already at hand (`known`: its flags
/// and accept_dad; nullptr: looked up when they matter).
Status configure_pod_link(Context& ctx, int index, const link::LinkInfo* known, const cni::CniResult& r, bool dad,
                          bool arp_notify) {
  netlink::Socket& pod = *ctx.pod;
  const bool v4 = std::any_of(r.ips.begin(), r.ips.end(), [](const cni::IpConfig& ip) { return ip.address.addr.is_v4(); });
  // arp_notify before the link comes up, so that its coming up announces the IPv4 addresses;
  // without one there is nothing to announce: set in the message that brings it up (the kernel
  // applies it after the flags), no message of its own.
  if (arp_notify && v4) PLUMB_TRY(enable_arp_notify(ctx, index));
  // Where the kernel skips duplicate address detection on this link, the addresses are added
  // usable at once (IFA_F_NODAD: what the kernel's queued work would make of them) and nothing is
  // waited for: the wait would only measure that work queue, whose latency grows with the
  // devices on the node.
  const bool v6 =
      std::any_of(r.ips.begin(), r.ips.end(), [](const cni::IpConfig& ip) { return !ip.address.addr.is_v4(); });
  if (dad && v6 && ctx.pod_ns != nullptr &&
      PLUMB_TRY(known != nullptr ? addr::dad_skipped(*known, *ctx.pod_ns) : addr::dad_skipped(pod, *ctx.pod_ns, index)))
    dad = false;
  bool v6_gateway = false;
  for (auto& ip : r.ips) {
    PLUMB_TRY(add_pod_address(ctx, index, ip.address, !dad && !ip.address.addr.is_v4()));
    v6_gateway |= !ip.address.addr.is_v4() && ip.gateway.has_value();
  }
  link::LinkChange up;
  up.up = true;
  if (arp_notify && !v4) up.arp_notify = true;
  PLUMB_TRY(steps::run(ctx, steps::SetUpPodLink{index, up}));
  // As ConfigureIface: with duplicate address detection and an IPv6 gateway, the ADD returns
  // once the addresses are usable (not tentative) or fails when one is a duplicate.
  if (dad && v6_gateway && ctx.pod_ns != nullptr) {
    auto st = addr::settle(pod, ctx.pod_ns->fd(), index, kDadSettleTimeout);
    if (!st) return std::unexpected(st.error().within(ctx.ifname));
  }
  for (auto& rt : r.routes) {
    route::Route kr;
    kr.dst = rt.dst;
    kr.gw = rt.gw;
    if (!kr.gw) {
      for (auto& ip : r.ips) {
        if (ip.gateway && ip.gateway->family == rt.dst.addr.family) {
          kr.gw = ip.gateway;
          break;
        }
      }
    }
    kr.oif = index;
    if (rt.priority) kr.priority = static_cast<uint32_t>(*rt.priority);
    if (rt.table) kr.table = static_cast<uint32_t>(*rt.table);
    if (rt.mtu_bytes) kr.mtu_bytes = static_cast<uint32_t>(*rt.mtu_bytes);
    if (!kr.gw) kr.scope = RT_SCOPE_LINK;
    auto st = steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, kr, /*exist_ok=*/true});
    if (!st) {
      return std::unexpected(st.error().within("add route " + rt.dst.str() + (kr.gw ? " via " + kr.gw->str() : "")));
    }
  }
  return {};
}

}  // namespace

Status configure_pod_interface(Context& ctx, int index, const cni::CniResult& r, bool dad, bool arp_notify) {
  return configure_pod_link(ctx, index, nullptr, r, dad, arp_notify);
}

Status finish_pod_interface(Context& ctx, const link::LinkInfo& pod_link, cni::CniResult& r, bool arp_notify) {
  r.interfaces.clear();
  r.interfaces.push_back({ctx.ifname, pod_link.mac() ? pod_link.mac()->str() : "", pod_link.mtu_bytes, ctx.netns_path, {}, {}});
  for (auto& ip : r.ips) ip.interface = 0;
  return configure_pod_link(ctx, pod_link.index, &pod_link, r, /*dad=*/true, arp_notify);
}

Result<std::optional<Mac>> requested_mac(const json::Value& conf, const ParseInput& in) {
  const std::string& where = in.network;
  std::optional<std::string> mac = PLUMB_TRY(json::get_string(conf, "mac", where));
  for (auto& [k, v] : in.cni_args) {
    if (k == "MAC") mac = v;
  }
  if (const json::Value* args = PLUMB_TRY(json::get_object(conf, "args", where))) {
    if (const json::Value* cni = PLUMB_TRY(json::get_object(*args, "cni", where + ".args"))) {
      if (auto m = PLUMB_TRY(json::get_string(*cni, "mac", where + ".args.cni"))) mac = *m;
    }
  }
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto m = PLUMB_TRY(json::get_string(*rc, "mac", where + ".runtimeConfig", true))) mac = *m;
  }
  if (!mac || mac->empty()) return std::optional<Mac>{};
  auto parsed = Mac::parse(*mac);
  if (!parsed) return fail(cni_code::kInvalidConfig, where + ": mac \"" + *mac + "\" is not a valid MAC address");
  return std::optional<Mac>(*parsed);
}

Result<std::optional<uint32_t>> parse_mtu(const json::Value& obj, std::string_view where, std::string_view key) {
  auto m = PLUMB_TRY(json::get_int(obj, key, where));
  if (!m || *m == 0) return std::optional<uint32_t>{};
  if (*m < 68 || *m > 65535) {
    return fail(cni_code::kInvalidConfig,
                std::string(where) + "." + std::string(key) + " " + std::to_string(*m) + " is out of range (68..65535)");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*m));
}

Status check_ipmasq_backend(const json::Value& conf, const std::string& where) {
  if (auto b = PLUMB_TRY(json::get_string(conf, "ipMasqBackend", where)); b && *b != "iptables" && *b != "nftables") {
    return fail(cni_code::kInvalidConfig, where + ".ipMasqBackend \"" + *b + "\" must be \"iptables\" or \"nftables\"");
  }
  return {};
}

Status masquerade_addresses(Context& ctx, const cni::CniResult& r) {
  // The network chain is rewritten on every add: give it every subnet of the network.
  std::vector<IpPrefix> subnets;
  subnets.reserve(r.ips.size());
  for (auto& ip : r.ips) subnets.push_back(ip.address.network());
  for (auto& ip : r.ips) {
    PLUMB_TRY(steps::run(ctx, steps::AddMasquerade{ctx.network, subnets, ip.address.addr}));
  }
  return {};
}

std::string random_ifname(std::string_view prefix) {
  uint32_t r = 0;
  while (getrandom(&r, sizeof r, 0) != sizeof r) {
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", r);
  return std::string(prefix) + buf;
}

Result<PodVeth> create_pod_veth(Context& ctx, link::VethSpec spec) {
  spec.peer_name = ctx.ifname;
  spec.peer_netns_fd = ctx.pod_ns->fd();
  for (int attempt = 0;; ++attempt) {
    spec.host_name = random_ifname("veth");
    auto made = steps::call(ctx, steps::CreatePodVeth{spec});
    if (made) return std::move(*made);
    if (made.error().sys_errno == EEXIST) {
      if (PLUMB_TRY(link::get(*ctx.pod, ctx.ifname))) {
        return fail(cni_code::kConflict, "interface " + ctx.ifname + " already exists in " + ctx.netns_path);
      }
      if (attempt < 4) continue;  // host-side name taken: another one
    }
    return std::unexpected(made.error().within(ctx.network + ": create veth pair " + spec.host_name + "/" + ctx.ifname +
                                               " in " + ctx.netns_path));
  }
}

// --- shared CHECK helpers --------------------------------------------------------------------------

Result<link::LinkInfo> check_pod_interface(Context& ctx, const cni::CniResult& prev, std::string_view kind) {
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l) return fail(cni_code::kKernel, "CHECK: interface " + ctx.ifname + " not found in " + ctx.netns_path);
  if (!kind.empty() && l->kind != kind) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is a " + (l->kind.empty() ? std::string("device without kind") : l->kind) +
                                       ", not a " + std::string(kind));
  }
  if (!l->up()) return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " is down");
  for (auto& i : prev.interfaces) {
    if (i.sandbox.empty() || i.name != ctx.ifname) continue;
    if (!i.mac.empty() && l->mac() && l->mac()->str() != i.mac) {
      return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MAC " + l->mac()->str() + ", expected " + i.mac);
    }
    if (i.mtu_bytes && *i.mtu_bytes != l->mtu_bytes) {
      return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " has MTU " + std::to_string(l->mtu_bytes) + ", expected " +
                                         std::to_string(*i.mtu_bytes));
    }
  }
  return *l;
}

Status check_pod_addresses(Context& ctx, int index, const cni::CniResult& prev) {
  auto addrs = PLUMB_TRY(addr::list(*ctx.pod, index));
  for (auto& ip : prev.ips) {
    bool found = std::any_of(addrs.begin(), addrs.end(), [&](const addr::AddrInfo& a) { return a.prefix == ip.address; });
    if (!found) return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " lacks address " + ip.address.str());
  }
  return {};
}

Status check_pod_routes(Context& ctx, const cni::CniResult& prev) {
  for (int family : {AF_INET, AF_INET6}) {
    // Every table: a chained plugin (sbr) may have moved the routes out of the main table.
    auto routes = PLUMB_TRY(route::list(*ctx.pod, family, route::kAllTables));
    for (auto& want : prev.routes) {
      if (want.dst.addr.family != family) continue;
      bool found = std::any_of(routes.begin(), routes.end(), [&](const route::Route& r) {
        return r.dst.network() == want.dst.network() && (!want.gw || (r.gw && *r.gw == *want.gw));
      });
      if (!found) {
        return fail(cni_code::kKernel, "CHECK: route " + want.dst.str() + (want.gw ? " via " + want.gw->str() : "") +
                                           " is missing in " + ctx.netns_path);
      }
    }
  }
  return {};
}

// --- shared undo operations ------------------------------------------------------------------------

namespace {

/// The addresses of the attachment's recorded result (DEL of a completed attachment), none
/// otherwise: the IPAM's release can then go straight to them.
std::vector<IpAddr> held_addresses(const Context& ctx) {
  std::vector<IpAddr> out;
  if (ctx.attachment_result == nullptr) return out;
  auto r = cni::decode_result(*ctx.attachment_result, "1.1.0");
  if (!r) return out;
  for (const auto& ip : r->ips) out.push_back(ip.address.addr);
  return out;
}

}  // namespace

namespace undo {

Status run_op(Context& ctx, const LinkDel& op) {
  netlink::Socket* nl = op.where == "pod" ? ctx.pod : ctx.node;
  if (nl == nullptr) return {};  // the pod namespace is gone, and its links with it
  Result<bool> removed = false;
  if (op.group) {
    auto l = link::get(*nl, op.name);
    if (!l) return std::unexpected(l.error().within("undo: look up link " + op.name));
    if (!*l || (*l)->group != *op.group) return {};  // gone, or not the link plumb made
    removed = link::remove(*nl, (*l)->index);
  } else {
    removed = link::remove(*nl, op.name);
  }
  if (!removed) return std::unexpected(removed.error().within("undo: delete link " + op.name));
  return {};
}

Status run_op(Context& ctx, const IpamRelease& op) {
  auto ipam = PLUMB_TRY(ipam::make(op.ipam, nullptr, &ctx.ipam_cluster));
  ipam::Request req;
  req.container_id = ctx.container_id;
  req.ifname = op.ifname;
  req.network_name = op.network;
  req.ipam = &op.ipam;
  req.cni_args = ctx.cni_args;
  req.held = held_addresses(ctx);
  auto st = ipam->del(req);
  if (!st) return std::unexpected(st.error().within("undo: release addresses of " + req.ifname));
  return {};
}

Status run_op(Context&, const DevinfoRemove& op) {
  auto st = devinfo::remove(op.path);
  if (!st) return std::unexpected(st.error().within("undo"));
  return {};
}

}  // namespace undo
void announce_addresses(Context& ctx, int index, const Mac& mac, const cni::CniResult& r,
                        std::chrono::milliseconds carrier_wait, bool ipv6) {
  if (ctx.pod == nullptr || ctx.pod_ns == nullptr) return;
  std::vector<IpAddr> addrs;
  for (const auto& ip : r.ips) {
    if (ip.address.addr.is_v4() || ipv6) addrs.push_back(ip.address.addr);
  }
  if (addrs.empty()) return;
  if (carrier_wait.count() > 0) (void)announce::wait_for_carrier(*ctx.pod, index, carrier_wait);
  (void)announce::send(*ctx.pod_ns, ctx.ifname, index, mac, addrs);
}

}  // namespace plumb::drivers
