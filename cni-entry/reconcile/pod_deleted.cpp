// whereabouts' ip-control-loop (pod_deleted.hpp).
#include "cni-entry/reconcile/pod_deleted.hpp"

#include <iterator>

#include "cni-entry/reconcile/reconcile.hpp"

namespace plumb::reconcile {

namespace rc = ipam::reconcile;

rc::Report release_deleted_pod(k8s::Client& client, const std::string& whereabouts_ns, const std::string& pod_ns,
                               const std::string& pod_name,
                               const std::function<bool(const std::string&)>& has_records) {
  rc::Report report;
  const std::string key = pod_ns + "/" + pod_name;
  auto snap = rc::read_kube(client, whereabouts_ns);  // the pools first, the pod after them (ipam/reconcile.hpp)
  if (!snap) {
    report.errors.push_back(snap.error());
    return report;
  }
  auto pod = client.get("/api/v1/namespaces/" + pod_ns + "/pods/" + pod_name, "get pod " + key);
  if (!pod) {
    report.errors.push_back(pod.error());
    return report;
  }
  rc::View view;
  if (*pod) {
    // Re-created under the same name: the reconciler's rules judge its earlier sandboxes; its node
    // is taken as existing (this view lists no nodes, so no rule may act on a node's absence).
    view.pods[key] = pod_view(**pod);
    view.nodes.insert(view.pods[key].node);
  }
  auto foreign = [&](const std::string& podref, const std::string& id) { return podref != key || has_records(id); };
  for (auto& pool : snap->pools) {
    std::erase_if(pool.allocations, [&](const auto& e) { return foreign(e.second.podref, e.second.id); });
  }
  std::erase_if(snap->reservations, [&](const auto& r) { return foreign(r.podref, r.container_id); });
  snap->slice_pools.clear();
  rc::reconcile_kube(client, *snap, view, /*dry_run=*/false, report);
  return report;
}

}  // namespace plumb::reconcile
