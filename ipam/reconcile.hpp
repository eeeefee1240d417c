// Reconciliation of the cluster IPAM's pools (`plumb reconcile`, cni-entry/reconcile.cpp): the
// allocations, reservations and node slices whose owner is gone, in whereabouts' Kubernetes
// objects and in plumb's etcd keys. The caller reads the pools first and the cluster (pods,
// nodes, IPAMClaims) after them: an allocation seen in a pool belongs to a pod that existed when
// it was read, so a pod missing from the later listing is really gone (a pod created meanwhile
// cannot be judged by a listing older than it).
//
// An allocation is released when (first rule that applies):
//   - its owner is an IPAMClaim ("ipamclaim:<ns>/<name>") that no longer exists;
//   - (etcd) the node that allocated it no longer exists;
//   - it names no pod (whereabouts' own rule: such allocations are left alone), or its claim exists;
//   - its pod no longer exists;
//   - its pod is bound to a node that no longer exists;
//   - its pod is Ready, its plumb/sandbox annotation (written with network-status after a
//     completed ADD) names another container, and that container holds an address for the same
//     pod and interface in the same pool: an earlier sandbox's allocation whose DEL never came.
// Nothing held by a live pod's current sandbox or by an existing IPAMClaim is ever released, and
// every release is conditional on the allocation being unchanged since it was read (a JSON patch
// testing its id; an etcd transaction comparing the owner key's revision; DELETE preconditions).
// Slices of NodeSlicePools assigned to nodes that no longer exist are freed.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/k8s/client.hpp"
#include "ipam/cluster.hpp"
#include "ipam/whereabouts.hpp"

namespace plumb::ipam::reconcile {

/// What the reconciler needs of one pod.
struct Pod {
  std::string node;     // spec.nodeName ("" = not scheduled)
  std::string sandbox;  // the plumb/sandbox annotation ("" = none)
  bool ready = false;   // status.conditions Ready is True
};

/// The cluster, read after the pools.
struct View {
  std::map<std::string, Pod> pods;  // by "<namespace>/<name>"
  std::set<std::string> nodes;
  std::set<std::string> claims;     // IPAMClaims by "<namespace>/<name>"
};

/// The owner of one allocation as stored.
struct Holder {
  std::string id;      // container ID or "ipamclaim:<ns>/<name>"
  std::string podref;  // "<ns>/<pod>" ("" = none)
  std::string ifname;
  std::string node;    // the node that allocated ("" = not recorded: whereabouts' objects)
};

/// Why `h` is stale, or "" to keep it (rules in the file comment). `sandbox_holds(id)`: whether
/// container `id` holds an address for h's pod and interface in the same pool.
[[nodiscard]] std::string stale_reason(const View& view, const Holder& h,
                                       const std::function<bool(const std::string& id)>& sandbox_holds);

/// One release decided, done (or, in a dry run, only printed).
struct Action {
  std::string what;    // "IPPool kube-system/blue-192.0.2.0-24: 192.0.2.7 of container c1 interface net1 (pod default/web)"
  std::string reason;  // stale_reason()
};

/// A reconciliation's outcome: what was (or would be) released, and the errors met on the way
/// (each pool is tried; one that fails does not stop the others).
struct Report {
  std::vector<Action> actions;
  std::vector<Error> errors;
};

/// whereabouts' objects of one namespace, read before the View.
struct KubeSnapshot {
  std::string ns;
  std::vector<whereabouts::Reservation> reservations;  // read first: each was made after its pool slot
  std::vector<whereabouts::IpPool> pools;
  std::vector<whereabouts::NodeSlicePool> slice_pools;
};

/// Reads whereabouts' objects of `ns`: reservations, then IPPools, then NodeSlicePools (lists; a
/// kind the API server does not serve, its CRD not installed, has none). Errors: the API
/// server's; kDecode naming an object that cannot be read.
[[nodiscard]] Result<KubeSnapshot> read_kube(k8s::Client& client, const std::string& ns);

/// Releases what is stale in `snap` given `view`: pool allocations (one JSON patch per pool,
/// testing each id), reservations (DELETE with uid and resourceVersion preconditions), and
/// slices of gone nodes (JSON patch testing each nodeName). With `dry_run` nothing is written.
/// A write that loses to another writer is skipped (the allocation changed: not stale any more).
void reconcile_kube(k8s::Client& client, const KubeSnapshot& snap, const View& view, bool dry_run, Report& report);

/// One etcd pool: its IPAM and its owners, read before the View.
struct EtcdPool {
  std::unique_ptr<cluster::ClusterIpam> ipam;
  std::vector<cluster::ClusterIpam::OwnerEntry> owners;
};

/// Releases the stale owners of `pool` (each only while its key is unchanged); nothing with
/// `dry_run`.
void reconcile_etcd(EtcdPool& pool, const View& view, bool dry_run, Report& report);

}  // namespace plumb::ipam::reconcile
