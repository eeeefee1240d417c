// `plumb reconcile`: releases the cluster IPAM's allocations whose owner is gone, in whereabouts'
// Kubernetes objects and in the etcd pools NADs name, as whereabouts' ip-reconciler does (run it
// as a CronJob: deploy/base/reconciler.yaml). The rules are ipam/reconcile.hpp's; this file reads the
// cluster and prints what it did.
//
//   plumb reconcile [--dry-run] [--kubeconfig PATH] [--namespace NS] [--timeout SECONDS]
//
//   --dry-run     print what would be released, write nothing
//   --kubeconfig  API credentials (default: the in-cluster service account)
//   --namespace   where whereabouts' objects live (default: $WHEREABOUTS_NAMESPACE, else the
//                 credentials' namespace, else kube-system)
//   --timeout     limit of one API request in seconds (default 30)
//
// Order of reads: whereabouts' objects and every etcd pool (NADs of every namespace name them)
// first, then pods, nodes and IPAMClaims (see ipam/reconcile.hpp for why). Output: one line per
// release on stdout ("released <what>: <reason>", or "would release" with --dry-run) and a
// summary; errors on stderr. Exit status 0, 1 when any pool could not be read or released (the
// others are still done), 2 for a usage error (cni-entry/cli/cli.cpp).
#pragma once

#include <string>

#include "engine/base/json.hpp"
#include "ipam/reconcile.hpp"

namespace plumb::reconcile {

/// The command line of `plumb reconcile` (cni-entry/cli/cli.cpp fills it).
struct Options {
  bool dry_run = false;          ///< --dry-run
  std::string kubeconfig;        ///< --kubeconfig ("" = the in-cluster service account)
  std::string ns;                ///< --namespace ("" = $WHEREABOUTS_NAMESPACE, the credentials', kube-system)
  double timeout_seconds = 30;   ///< --timeout, in (0, 3600]
};

/// What the reconciler needs of a Pod object: spec.nodeName, the plumb/sandbox annotation and
/// whether its Ready condition is True.
[[nodiscard]] ipam::reconcile::Pod pod_view(const json::Value& pod);

/// Runs `plumb reconcile`. Returns the process exit status (0, or 1 when any pool could not be
/// read or released).
[[nodiscard]] int run(const Options& o);

}  // namespace plumb::reconcile
