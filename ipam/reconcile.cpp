// Reconciliation of the cluster IPAM's pools (reconcile.hpp).
#include "ipam/reconcile.hpp"

#include <algorithm>

namespace plumb::ipam::reconcile {
namespace wb = whereabouts;
namespace {

std::string holder_text(const Holder& h) {
  return "container " + h.id + " interface " + h.ifname + (h.podref.empty() ? "" : " (pod " + h.podref + ")");
}

/// The HTTP write of one release: Won (done), Lost (the object changed: skipped), or an error.
Result<bool> write(k8s::Client& client, std::string_view method, const std::string& path, const std::string& body,
                   std::string_view type, const std::string& what) {
  auto resp = PLUMB_TRY(client.request(method, path, body, type));
  if (resp.status == 200 || resp.status == 201) return true;
  if (resp.status == 404 || resp.status == 409 || resp.status == 422) return false;
  return std::unexpected(client.http_error(what, method, path, resp));
}

void pools_of(k8s::Client& client, const KubeSnapshot& snap, const View& view, bool dry_run, Report& report) {
  for (const wb::IpPool& pool : snap.pools) {
    const std::string where = "IPPool " + snap.ns + "/" + pool.name;
    auto sandbox_holds = [&](const Holder& h) {
      return [&pool, h](const std::string& id) {
        return std::any_of(pool.allocations.begin(), pool.allocations.end(), [&](const auto& e) {
          return e.second.id == id && e.second.podref == h.podref && e.second.ifname == h.ifname;
        });
      };
    };
    std::vector<std::pair<wb::u128, std::string>> slots;
    std::vector<Action> acts;
    for (const auto& [off, a] : pool.allocations) {
      Holder h{a.id, a.podref, a.ifname, {}};
      std::string why = stale_reason(view, h, sandbox_holds(h));
      if (why.empty()) continue;
      slots.emplace_back(off, a.id);
      acts.push_back(Action{where + ": " + pool.at(off).str() + " of " + holder_text(h), why});
    }
    if (slots.empty()) continue;
    if (!dry_run) {
      auto ok = write(client, "PATCH", wb::pools_path(snap.ns, pool.name), wb::release_patch(slots), k8s::kJsonPatch,
                      "release stale allocations of " + where);
      if (!ok) {
        report.errors.push_back(ok.error());
        continue;
      }
      if (!*ok) continue;  // the pool changed since it was read: judged again by the next run
    }
    report.actions.insert(report.actions.end(), acts.begin(), acts.end());
  }
}

void reservations_of(k8s::Client& client, const KubeSnapshot& snap, const View& view, bool dry_run, Report& report) {
  for (const wb::Reservation& r : snap.reservations) {
    Holder h{r.container_id, r.podref, r.ifname, {}};
    std::string why = stale_reason(view, h, [&](const std::string& id) {
      return std::any_of(snap.pools.begin(), snap.pools.end(), [&](const wb::IpPool& p) {
        return std::any_of(p.allocations.begin(), p.allocations.end(), [&](const auto& e) {
          return e.second.id == id && e.second.podref == h.podref && e.second.ifname == h.ifname;
        });
      });
    });
    if (why.empty()) continue;
    const std::string what = "OverlappingRangeIPReservation " + snap.ns + "/" + r.name;
    if (!dry_run) {
      auto ok = write(client, "DELETE", wb::reservations_path(snap.ns, r.name), wb::delete_preconditions(r.uid, r.resource_version),
                      k8s::kJson, "delete stale " + what);
      if (!ok) {
        report.errors.push_back(ok.error());
        continue;
      }
      if (!*ok) continue;
    }
    report.actions.push_back(Action{what + " of " + holder_text(h), why});
  }
}

void slices_of(k8s::Client& client, const KubeSnapshot& snap, const View& view, bool dry_run, Report& report) {
  for (const wb::NodeSlicePool& p : snap.slice_pools) {
    std::vector<size_t> gone;
    for (size_t i = 0; i < p.allocations.size(); ++i) {
      if (!p.allocations[i].first.empty() && !view.nodes.contains(p.allocations[i].first)) gone.push_back(i);
    }
    if (gone.empty()) continue;
    const std::string what = "NodeSlicePool " + snap.ns + "/" + p.name;
    if (!dry_run) {
      auto ok = write(client, "PATCH", wb::slice_pools_path(snap.ns, p.name), wb::free_slices_patch(p, gone), k8s::kJsonPatch,
                      "free the slices of gone nodes in " + what);
      if (!ok) {
        report.errors.push_back(ok.error());
        continue;
      }
      if (!*ok) continue;
    }
    for (size_t i : gone) {
      report.actions.push_back(Action{what + ": slice " + p.allocations[i].second, "node " + p.allocations[i].first + " is gone"});
    }
  }
}

template <class T>
Result<std::vector<T>> read_all(k8s::Client& client, const std::string& path, const std::string& what,
                                Result<T> (*decode)(const json::Value&, const std::string&)) {
  std::vector<T> out;
  auto items = client.list(path, "list " + what);
  if (!items && items.error().cni_code == cni_code::kNotFound) return out;  // the CRD is not installed: none
  if (!items) return std::unexpected(items.error());
  for (const auto& item : *items) out.push_back(PLUMB_TRY(decode(item, what)));
  return out;
}

}  // namespace

std::string stale_reason(const View& view, const Holder& h, const std::function<bool(const std::string& id)>& sandbox_holds) {
  constexpr std::string_view kClaim = "ipamclaim:";
  if (std::string_view(h.id).starts_with(kClaim)) {
    std::string claim = h.id.substr(kClaim.size());
    return view.claims.contains(claim) ? std::string() : "IPAMClaim " + claim + " no longer exists";
  }
  if (!h.node.empty() && !view.nodes.contains(h.node)) return "node " + h.node + " that allocated it is gone";
  if (h.podref.empty()) return {};  // nothing to judge it by (whereabouts leaves these too)
  auto pod = view.pods.find(h.podref);
  if (pod == view.pods.end()) return "pod " + h.podref + " no longer exists";
  if (!pod->second.node.empty() && !view.nodes.contains(pod->second.node)) {
    return "node " + pod->second.node + " of pod " + h.podref + " is gone";
  }
  const std::string& sandbox = pod->second.sandbox;
  if (pod->second.ready && !sandbox.empty() && !h.id.empty() && h.id != sandbox && sandbox_holds(sandbox)) {
    return "pod " + h.podref + " runs in sandbox " + sandbox + " now, which holds its own address";
  }
  return {};
}

Result<KubeSnapshot> read_kube(k8s::Client& client, const std::string& ns) {
  KubeSnapshot s;
  s.ns = ns;
  s.reservations = PLUMB_TRY(read_all<wb::Reservation>(client, wb::reservations_path(ns),
                                                       "OverlappingRangeIPReservations in " + ns, &wb::decode_reservation));
  s.pools = PLUMB_TRY(read_all<wb::IpPool>(client, wb::pools_path(ns), "IPPools in " + ns, &wb::decode_pool));
  s.slice_pools = PLUMB_TRY(read_all<wb::NodeSlicePool>(client, wb::slice_pools_path(ns), "NodeSlicePools in " + ns,
                                                        &wb::decode_slice_pool));
  return s;
}

void reconcile_kube(k8s::Client& client, const KubeSnapshot& snap, const View& view, bool dry_run, Report& report) {
  pools_of(client, snap, view, dry_run, report);
  reservations_of(client, snap, view, dry_run, report);
  slices_of(client, snap, view, dry_run, report);
}

void reconcile_etcd(EtcdPool& pool, const View& view, bool dry_run, Report& report) {
  const auto& cfg = pool.ipam->config();
  for (const auto& o : pool.owners) {
    Holder h{o.container_id, o.pod_ref, o.ifname, o.node};
    std::string why = stale_reason(view, h, [&](const std::string& id) {
      return std::any_of(pool.owners.begin(), pool.owners.end(),
                         [&](const auto& e) { return e.container_id == id && e.pod_ref == h.podref && e.ifname == h.ifname; });
    });
    if (why.empty()) continue;
    std::string addrs;
    for (const auto& ip : o.ips) addrs += (addrs.empty() ? "" : ", ") + ip.addr.str();
    const std::string what = "etcd pool " + cfg.pool_name + ": " + (addrs.empty() ? "no address" : addrs) + " of " + holder_text(h);
    if (!dry_run) {
      auto st = pool.ipam->release_entry(o);
      if (!st) {
        report.errors.push_back(st.error().within("release stale " + what));
        continue;
      }
    }
    report.actions.push_back(Action{what, why});
  }
}

}  // namespace plumb::ipam::reconcile
