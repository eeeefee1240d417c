// Running and undoing one attachment (attach.hpp).
#include "cni-entry/pod/attach.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <variant>

#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"

namespace plumb::pod {

namespace {

/// True when the namespace open as `fd` is the node's own: plumb's (the node namespace every
/// node-side change goes to) or PID 1's.
bool is_node_netns(int fd) {
  struct stat target {};
  if (::fstat(fd, &target) != 0) return false;
  for (const char* own : {"/proc/self/ns/net", "/proc/1/ns/net"}) {
    struct stat st {};
    if (::stat(own, &st) == 0 && st.st_dev == target.st_dev && st.st_ino == target.st_ino) return true;
  }
  return false;
}

Error node_netns_error(const std::string& path) {
  return Error{cni_code::kInvalidEnv, 0, "CNI_NETNS \"" + path + "\" is the node's own network namespace: a pod never runs in it", {}};
}

}  // namespace

Status refuse_node_netns(const std::string& netns_path) {
  if (netns_path.empty()) return {};
  auto ns = netns::Netns::open(netns_path);
  if (ns && is_node_netns(ns->fd())) return std::unexpected(node_netns_error(netns_path));
  return {};
}

namespace {

bool remember_node = false;

/// The calling thread's watch of the namespace of `node` (opened when `node` is another socket
/// than last time: another namespace, or a replaced socket); null when it cannot be opened.
netconf::Watch* node_watch_for(const std::shared_ptr<netlink::Socket>& node) {
  struct Kept {
    std::shared_ptr<netlink::Socket> node;  // held: the pointer identifies the namespace
    std::unique_ptr<netconf::Watch> watch;
  };
  thread_local Kept kept;
  if (kept.node != node) {
    kept.watch.reset();
    kept.node = node;
    if (auto w = netconf::Watch::open()) kept.watch = std::move(*w);
  }
  return kept.watch.get();
}

}  // namespace

void remember_node_facts() { remember_node = true; }

Result<Kernel> open_kernel(const std::string& netns_path, bool need_pod) {
  Kernel k;
  k.node = PLUMB_TRY(netlink::shared(NETLINK_ROUTE));
  if (remember_node) k.node_watch = node_watch_for(k.node);
  if (!netns_path.empty()) {
    auto ns = netns::Netns::open(netns_path);
    if (ns && is_node_netns(ns->fd())) {
      if (need_pod) return std::unexpected(node_netns_error(netns_path));
      k.netns_is_node = true;
    } else if (ns) {
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
  ctx.container_id = env.container_id;
  ctx.ifname = ifname;
  ctx.network = network;
  ctx.netns_path = k.pod_ns ? k.pod_ns->path() : "";
  ctx.pod_ns = k.pod_ns ? &*k.pod_ns : nullptr;
  ctx.node = k.node.get();
  ctx.node_watch = k.node_watch;
  ctx.pod = k.pod ? &*k.pod : nullptr;
  ctx.cni_args = env.args;
  ctx.plugin_search = plugin_search(conf, env.path);
  ctx.ipam_cluster = ipam_cluster(conf);
  return ctx;
}

Result<cni::CniResult> run_chain(const cni::Env& env, const PlumbConfig& conf, Kernel& k, Attachment& att, txn::Journal& journal) {
  auto ctx = make_context(env, conf, k, att.ifname, att.net.name);
  ctx.cni_args.insert(ctx.cni_args.end(), att.add_args.begin(), att.add_args.end());
  ctx.journal = &journal;
  if (att.claim) {
    ctx.ipam_owner = att.claim->owner;
    ctx.ipam_owner_ips = att.claim->ips;
  }
  // The device plugin's file is copied before the chain runs; the driver completes it.
  ctx.device_info_file = att.device_info.file;
  PLUMB_TRY(devinfo::prepare(journal, conf.device_info_dir, att.device_info));
  // One executor for the whole chain: it keeps the veth pairs made for the later plugins.
  drivers::steps::JournalExecutor executor;
  ctx.executor = &executor;
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

bool recordable(const state::StateDir& state, const state::AttachmentRecord& rec) {
  return !rec.origin.empty() && rec.origin == state.record_path(rec);
}

namespace {

/// Rewrites `rec` with only the undo entries of `kept`; the notice for the operator's log.
Result<std::string> keep_for_newer(const state::StateDir& state, const state::AttachmentRecord& rec, drivers::undo::Kept& kept,
                                   const std::string& origin) {
  // A copy through the one encoder and decoder (records hold documents, which do not copy).
  state::AttachmentRecord reduced = PLUMB_TRY(state::decode(state::encode(rec), origin));
  reduced.undo.Swap(kept.entries);
  reduced.origin.clear();  // written whole in place (not as one of an ADD's versions through a spare)
  PLUMB_TRY(state.write(reduced));
  std::string names;
  for (const auto& n : kept.unknown) names += (names.empty() ? "\"" : ", \"") + n + "\"";
  const size_t waiting = reduced.undo.Size() - kept.unknown.size();
  return "kept undo operation(s) " + names + " of " + rec.ifname + " (" + rec.network + ") in " + state.record_path(reduced) +
         ": written by a newer plumb, unknown to this one" +
         (waiting == 0 ? std::string() : " (with the " + std::to_string(waiting) + " recorded before one that may not be skipped)") +
         "; what they undo stays on the node until a plumb that knows them runs DEL or GC of " + rec.key().describe();
}

}  // namespace

Result<std::string> teardown(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                             state::AttachmentRecord& rec, bool complete) {
  auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
  txn::Journal journal(state, rec);
  if (recordable(state, rec)) ctx.journal = &journal;
  // Delegated plugins get the attachment's result as prevResult (libcni's cached result).
  if (rec.phase == "ready" && rec.result.IsObject()) ctx.attachment_result = &rec.result;
  const std::string origin = rec.origin.empty() ? state.record_path(rec) : rec.origin;
  drivers::undo::Kept kept;
  auto st = drivers::undo::unwind(ctx, rec.undo, complete, origin, &kept);
  if (!st) return std::unexpected(st.error().within("tear down " + rec.ifname + " (" + rec.network + ")"));
  if (!kept.empty()) return keep_for_newer(state, rec, kept, origin);
  PLUMB_TRY(state.remove(rec));
  return std::string();
}

void Errors::add(const Error& e) {
  if (!first_) {
    first_ = e;
  } else {
    more_ += "; " + e.text();
  }
}

Status Errors::status() const {
  if (!first_) return {};
  if (more_.empty()) return std::unexpected(*first_);
  return std::unexpected(Error{first_->cni_code, 0, first_->text() + more_, {}});
}

void screen(state::Records& recs) {
  for (auto it = recs.records.begin(); it != recs.records.end();) {
    if (auto st = drivers::undo::check(it->undo, it->origin, /*allow_unknown=*/true); !st) {
      recs.damaged.push_back(state::DamagedRecord{it->origin, st.error()});
      it = recs.records.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

/// Ends every process the usable records of `recs` hold (delegated plugins' ADD and DEL,
/// drivers::undo::DelegateEndProcess) before anything else is undone: the key's lock is held, so
/// one still running was left by a plumb killed meanwhile and must not act during or after this
/// teardown. A failure here is the operation's own, reported again when the records unwind it.
void end_orphans(const state::Records& recs) {
  drivers::Context unused;  // ending a process needs none
  for (const auto& rec : recs.records) {
    if (!rec.undo.IsArray()) continue;
    for (const auto& v : rec.undo.GetArray()) {
      const json::Value* name = json::find(v, "op");
      if (name == nullptr || !name->IsString() || name->GetString() != drivers::undo::DelegateEndProcess::kName) continue;
      auto op = drivers::undo::decode(v, rec.origin);
      if (op && std::holds_alternative<drivers::undo::DelegateEndProcess>(*op)) (void)drivers::undo::run(unused, *op);
    }
  }
}

}  // namespace

bool teardown_all(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state, const state::Key& key,
                  state::Records& recs, bool keep_disable_gc, Errors& errors) {
  screen(recs);
  end_orphans(recs);
  bool all_gone = true;
  // The pod's devices in one message where possible (every record goes); else record by record.
  const bool keeps_some = keep_disable_gc && std::any_of(recs.records.begin(), recs.records.end(),
                                                         [](const state::AttachmentRecord& r) { return r.disable_gc; });
  auto batched = keeps_some ? std::nullopt : teardown_batched(env, conf, k, state, recs.records);
  for (size_t i = recs.records.size(); i-- > 0;) {
    auto& rec = recs.records[i];
    if (keep_disable_gc && rec.disable_gc) {
      all_gone = false;
      continue;
    }
    Result<std::string> st = std::string();
    if (!batched) {
      st = teardown(env, conf, k, state, rec, rec.phase == "ready");
    } else if (!(*batched)[i]) {
      st = std::unexpected((*batched)[i].error());
    }
    if (!st) {
      all_gone = false;
      errors.add(st.error());
    } else if (!st->empty()) {
      all_gone = false;
      errors.keep(*st);
    }
  }
  // After every usable record was tried: the damaged ones, so nothing they describe is forgotten.
  for (const auto& d : recs.damaged) {
    if (d.error.cni_code == cni_code::kNewerRecord) {
      // Nothing of it can be run, and failing would only make the runtime retry forever: kept
      // whole for the plumb that wrote it, the operator told.
      all_gone = false;
      errors.keep(d.error.text() + "; kept whole, nothing of it undone: what it describes stays on the node until a plumb that "
                                   "reads it runs DEL or GC of " + key.describe());
      continue;
    }
    auto moved = state.quarantine(key, d.path);
    if (!moved) {
      all_gone = false;
      errors.add(d.error);
      errors.add(moved.error().within("quarantine"));
      continue;
    }
    errors.add(Error{d.error.cni_code, 0,
                     d.error.text() + "; nothing of it was undone: the record was moved to " + *moved +
                         " (what it describes may remain on the node)",
                     {}});
  }
  return all_gone;
}

}  // namespace plumb::pod
