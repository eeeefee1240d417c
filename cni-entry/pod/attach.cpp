// Running and undoing one attachment (attach.hpp).
#include "cni-entry/pod/attach.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "drivers/undo.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"

namespace plumb::pod {

Result<Kernel> open_kernel(const std::string& netns_path, bool need_pod) {
  Kernel k;
  k.node = PLUMB_TRY(netlink::Socket::open());
  if (!netns_path.empty()) {
    auto ns = netns::Netns::open(netns_path);
    if (ns) {
      k.pod_ns = std::move(*ns);
      k.pod = PLUMB_TRY(netlink::Socket::open_in(k.pod_ns->fd()));
    } else if (need_pod) {
      return fail(cni_code::kInvalidEnv, "CNI_NETNS \"" + netns_path + "\" cannot be opened", ns.error().text());
    }
  } else if (need_pod) {
    return fail(cni_code::kInvalidEnv, "CNI_NETNS is required");
  }
  return k;
}

drivers::Context make_context(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const std::string& ifname,
                              const std::string& network) {
  drivers::Context ctx;
  ctx.sysfs_root = conf.sysfs_root;
  ctx.state_dir = conf.state_dir;
  ctx.bpffs_dir = conf.bpffs_dir;
  ctx.tuning_allowlist = conf.tuning_allowlist;
  ctx.container_id = env.container_id;
  ctx.ifname = ifname;
  ctx.network = network;
  ctx.netns_path = k.pod_ns ? k.pod_ns->path() : "";
  ctx.pod_ns = k.pod_ns ? &*k.pod_ns : nullptr;
  ctx.node = k.node ? &*k.node : nullptr;
  ctx.pod = k.pod ? &*k.pod : nullptr;
  ctx.cni_args = env.args;
  ctx.vf_backends = nullptr;
  ctx.plugin_search = plugin_search(conf, env.path);
  ctx.ipam_cluster = ipam_cluster(conf);
  return ctx;
}

Result<cni::CniResult> run_chain(const cni::Env& env, const PlumbConfig& conf, Kernel& k, Attachment& att, txn::Journal& journal) {
  auto ctx = make_context(env, conf, k, att.ifname, att.net.name);
  ctx.journal = &journal;
  if (att.claim) {
    ctx.ipam_owner = att.claim->owner;
    ctx.ipam_owner_ips = att.claim->ips;
  }
  // The device plugin's file is copied before the chain runs; the driver completes it.
  ctx.device_info_file = att.device_info.file;
  PLUMB_TRY(devinfo::prepare(journal, conf.device_info_dir, att.device_info));
  std::optional<cni::CniResult> prev;
  for (const auto& p : att.parsed) {
    auto r = p.driver->add(ctx, *p.config, prev ? &*prev : nullptr);
    if (!r) return std::unexpected(r.error().within(att.where()));
    prev = std::move(*r);
  }
  if (!prev) return fail(cni_code::kInvalidConfig, att.where() + ": the network has no plugins");
  prev->cni_version = std::string(kInternalVersion);
  return *prev;
}

Status apply_default_route(Kernel& k, const Attachment& chosen, std::vector<cni::CniResult>& results,
                           const std::vector<Attachment>& atts) {
  const auto& gateways = *chosen.element->default_route;
  auto target = PLUMB_TRY(link::get(*k.pod, chosen.ifname));
  if (!target) return fail(cni_code::kKernel, "default-route: interface " + chosen.ifname + " not found");
  for (int family : {AF_INET, AF_INET6}) {
    auto routes = PLUMB_TRY(route::list(*k.pod, family));
    for (auto& r : routes) {
      if (r.is_default()) PLUMB_TRY(route::remove(*k.pod, r));
    }
  }
  uint32_t metric = 0;
  for (auto& gw : gateways) {
    route::Route r;
    r.dst = PLUMB_TRY(IpPrefix::parse(gw.is_v4() ? "0.0.0.0/0" : "::/0"));
    r.gw = gw;
    r.oif = target->index;
    r.priority = metric++;
    auto st = route::add(*k.pod, r);
    if (!st) return std::unexpected(st.error().within("default-route via " + gw.str() + " on " + chosen.ifname));
  }
  for (size_t i = 0; i < atts.size(); ++i) {
    auto& routes = results[i].routes;
    routes.erase(std::remove_if(routes.begin(), routes.end(), [](const cni::RouteEntry& r) { return r.dst.len == 0; }), routes.end());
    if (&atts[i] == &chosen) {
      for (auto& gw : gateways) {
        cni::RouteEntry e;
        e.dst = *IpPrefix::parse(gw.is_v4() ? "0.0.0.0/0" : "::/0");
        e.gw = gw;
        routes.push_back(std::move(e));
      }
    }
  }
  return {};
}

Status teardown(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                const state::AttachmentRecord& rec, bool complete) {
  auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
  // Delegated plugins get the attachment's result as prevResult (libcni's cached result).
  if (rec.phase == "ready" && rec.result.IsObject()) ctx.attachment_result = &rec.result;
  auto st = drivers::undo::unwind(ctx, rec.undo, complete, state.record_path(rec));
  if (!st) return std::unexpected(st.error().within("tear down " + rec.ifname + " (" + rec.network + ")"));
  return state.remove(rec);
}

}  // namespace plumb::pod
