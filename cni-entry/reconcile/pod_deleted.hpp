// whereabouts' ip-control-loop in `plumb daemon`: when a pod of this node is deleted from the API,
// the cluster IPAM's allocations still held for it are released at once instead of at the next
// `plumb reconcile` (whereabouts' CronJob), by the reconciler's own rules (ipam/reconcile.hpp):
// whereabouts' objects are read first, then the pod (gone, or re-created under the same name and
// judged as the reconciler judges it), and only that pod's allocations, reservations included,
// are considered; node slices are left to the reconciler. An allocation whose container still
// has plumb's records on this node is left to that container's DEL, which releases it itself.
// The etcd datastore's pools are left to `plumb reconcile`.
#pragma once

#include <functional>
#include <string>

#include "engine/k8s/client.hpp"
#include "ipam/reconcile.hpp"

namespace plumb::reconcile {

/// Releases the allocations of pod `pod_ns`/`pod_name` in whereabouts' objects of `whereabouts_ns`
/// whose container `has_records(containerID)` says has no record on this node. Returns what was
/// released (Action: what and the reconciler's reason) and the errors met (each pool is tried;
/// a pod that cannot be read releases nothing).
[[nodiscard]] ipam::reconcile::Report release_deleted_pod(k8s::Client& client, const std::string& whereabouts_ns,
                                                          const std::string& pod_ns, const std::string& pod_name,
                                                          const std::function<bool(const std::string&)>& has_records);

}  // namespace plumb::reconcile
