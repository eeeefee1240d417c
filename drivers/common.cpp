// Pieces every driver shares: undo operations, pod interface configuration, IPAM invocation.
#include <sys/random.h>
#include <sys/socket.h>

#include <cstdio>
#include <map>

#include "drivers/driver.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/link.hpp"
#include "engine/nft/nft.hpp"
#include "engine/kernel/route.hpp"
#include "ipam/ipam.hpp"

namespace plumb::drivers {
namespace undo {
namespace {
json::Document op(std::string_view name) {
  json::Document d(rapidjson::kObjectType);
  json::set_string(d, "op", name, d.GetAllocator());
  return d;
}
}  // namespace

json::Document link_del(std::string_view where, const std::string& name) {
  auto d = op("link_del");
  json::set_string(d, "where", where, d.GetAllocator());
  json::set_string(d, "name", name, d.GetAllocator());
  return d;
}

json::Document bridge_del_if_unused(const std::string& name) {
  auto d = op("bridge_del_if_unused");
  json::set_string(d, "name", name, d.GetAllocator());
  return d;
}

json::Document ipam_release(const json::Value& ipam, const std::string& network, const std::string& ifname) {
  auto d = op("ipam_release");
  auto& a = d.GetAllocator();
  json::Value v;
  v.CopyFrom(ipam, a);
  json::set(d, "ipam", std::move(v), a);
  json::set_string(d, "network", network, a);
  json::set_string(d, "ifname", ifname, a);
  return d;
}

json::Document masq_del(const std::string& pod_ip) {
  auto d = op("masq_del");
  json::set_string(d, "ip", pod_ip, d.GetAllocator());
  return d;
}
}  // namespace undo

namespace {

using UndoFn = Status (*)(Context&, const json::Value&);

Result<std::string> field(const json::Value& op, std::string_view key) {
  auto v = PLUMB_TRY(json::get_string(op, key, "undo operation"));
  if (!v) return fail(cni_code::kDecode, "undo operation " + json::dump(op) + " lacks \"" + std::string(key) + "\"");
  return *v;
}

Status undo_link_del(Context& ctx, const json::Value& op) {
  std::string where = PLUMB_TRY(field(op, "where"));
  std::string name = PLUMB_TRY(field(op, "name"));
  netlink::Socket* nl = where == "pod" ? ctx.pod : ctx.node;
  if (nl == nullptr) return {};  // the pod namespace is gone, and its links with it
  auto removed = link::remove(*nl, name);
  if (!removed) return std::unexpected(removed.error().within("undo: delete link " + name));
  return {};
}

Status undo_bridge_del_if_unused(Context& ctx, const json::Value& op) {
  std::string name = PLUMB_TRY(field(op, "name"));
  auto br = PLUMB_TRY(link::get(*ctx.node, name));
  if (!br || br->kind != "bridge") return {};
  auto links = PLUMB_TRY(link::list(*ctx.node));
  for (auto& l : links) {
    if (l.master_index == br->index) return {};  // still in use by another attachment
  }
  auto removed = link::remove(*ctx.node, br->index);
  if (!removed) return std::unexpected(removed.error().within("undo: delete bridge " + name));
  return {};
}

Status undo_ipam_release(Context& ctx, const json::Value& op) {
  const json::Value* ipam_conf = json::find(op, "ipam");
  if (ipam_conf == nullptr) return fail(cni_code::kDecode, "undo ipam_release without ipam config");
  auto ipam = PLUMB_TRY(ipam::make(*ipam_conf));
  ipam::Request req;
  req.container_id = ctx.container_id;
  req.ifname = PLUMB_TRY(field(op, "ifname"));
  req.network_name = PLUMB_TRY(field(op, "network"));
  req.ipam = ipam_conf;
  req.cni_args = ctx.cni_args;
  auto st = ipam->del(req);
  if (!st) return std::unexpected(st.error().within("undo: release addresses of " + req.ifname));
  return {};
}

Status undo_masq_del(Context&, const json::Value& op) {
  auto ip = PLUMB_TRY(IpAddr::parse(PLUMB_TRY(field(op, "ip"))));
  auto removed = nft::del_masquerade(ip);
  if (!removed) return std::unexpected(removed.error().within("undo: remove masquerade of " + ip.str()));
  return {};
}

const std::map<std::string_view, UndoFn>& undo_table() {
  static const std::map<std::string_view, UndoFn> table = {
      {"link_del", undo_link_del},
      {"bridge_del_if_unused", undo_bridge_del_if_unused},
      {"ipam_release", undo_ipam_release},
      {"masq_del", undo_masq_del},
      {"devinfo_remove", [](Context&, const json::Value& op) { return devinfo::run_undo_remove(op); }},
  };
  return table;
}

}  // namespace

Status run_undo(Context& ctx, const json::Value& op) {
  std::string name = PLUMB_TRY(field(op, "op"));
  if (auto dot = name.find('.'); dot != std::string::npos) {
    const Driver* d = find(std::string_view(name).substr(0, dot));
    if (d == nullptr || d->undo == nullptr) return fail(cni_code::kDecode, "undo operation \"" + name + "\" has no driver");
    return d->undo(ctx, op);
  }
  auto it = undo_table().find(name);
  if (it == undo_table().end()) return fail(cni_code::kDecode, "unknown undo operation \"" + name + "\"");
  return it->second(ctx, op);
}

Status configure_pod_interface(netlink::Socket& pod, int index, const cni::CniResult& r, bool dad) {
  for (auto& ip : r.ips) {
    auto st = addr::add(pod, index, ip.address, !dad && !ip.address.addr.is_v4());
    if (!st) return std::unexpected(st.error().within("add address " + ip.address.str()));
  }
  link::LinkChange up;
  up.up = true;
  PLUMB_TRY(link::modify(pod, index, up));
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
    auto st = route::add(pod, kr);
    if (!st && st.error().sys_errno != EEXIST) {
      return std::unexpected(st.error().within("add route " + rt.dst.str() + (kr.gw ? " via " + kr.gw->str() : "")));
    }
  }
  return {};
}

Result<cni::CniResult> run_ipam(Context& ctx, const json::Value& conf) {
  const json::Value* ipam_conf = PLUMB_TRY(json::get_object(conf, "ipam", ctx.network));
  if (ipam_conf == nullptr || json::find(*ipam_conf, "type") == nullptr) return cni::CniResult{};
  auto ipam = PLUMB_TRY(ipam::make(*ipam_conf));
  PLUMB_TRY(ctx.journal->will(undo::ipam_release(*ipam_conf, ctx.network, ctx.ifname)));
  ipam::Request req;
  req.container_id = ctx.container_id;
  req.ifname = ctx.ifname;
  req.network_name = ctx.network;
  req.ipam = ipam_conf;
  req.runtime_config = PLUMB_TRY(json::get_object(conf, "runtimeConfig", ctx.network));
  req.args = PLUMB_TRY(json::get_object(conf, "args", ctx.network));
  req.cni_args = ctx.cni_args;
  return ipam->add(req);
}

Result<std::optional<Mac>> requested_mac(const Context& ctx, const json::Value& conf) {
  const std::string& where = ctx.network;
  std::optional<std::string> mac = PLUMB_TRY(json::get_string(conf, "mac", where));
  for (auto& [k, v] : ctx.cni_args) {
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

std::string random_ifname(std::string_view prefix) {
  uint32_t r = 0;
  while (getrandom(&r, sizeof r, 0) != sizeof r) {
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", r);
  return std::string(prefix) + buf;
}

}  // namespace plumb::drivers
