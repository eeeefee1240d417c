// The cluster IPAM's Kubernetes datastore: whereabouts' own objects (ipam/whereabouts.hpp) through
// plumb's API client and credentials, so a cluster moves between whereabouts and plumb with its
// live pods, and both can run side by side.
//
// ADD, per range of the config (one IPPool each):
//   1. GET the pool (a missing pool is created with the new allocation in it: POST);
//   2. an allocation of this container+ifname (or of the IPAMClaim owner) is returned as it is
//      (a repeated ADD); else the first free address from the node's starting point (a hash of
//      node and pool, so nodes start apart), or the requested one;
//   3. PATCH a JSON patch: test that the slot is absent, add it. A failed test (422) or a 409
//      means another writer was first: the address is marked taken and another candidate tried,
//      the pool re-read every third conflict, at most 24 writes per range (then code 11). Two
//      writers never both get an address (the slot test is the compare-and-swap), and writers
//      taking different addresses never conflict: no global lock, no resourceVersion race;
//   4. with enable_overlapping_ranges (default), POST the address's
//      OverlappingRangeIPReservation: AlreadyExists from another owner means another range (or
//      NAD) holds the address: the slot is released and another candidate tried.
//   Common path: 1 GET + 1 PATCH per range (+ 1 POST with overlapping ranges). A range that
//   fails releases what this ADD took in the ranges before it (dual stack is all or nothing).
// Node slices (node_slice_size): the node's slice is read from the NodeSlicePool named after
// network_name (else the CNI network's name); a node without one takes a free slice itself
// (JSON patch testing the object's resourceVersion), creating the NodeSlicePool when it does not
// exist, so no whereabouts node-slice controller is needed (its assignments are honoured). The
// node then allocates only from its own IPPool ("<network>-<node>-<slice>"): no cross-node
// contention. One more GET per ADD.
// DEL: GET each pool, PATCH away the allocations of container+ifname (testing each id), then
// delete their OverlappingRangeIPReservations that are still theirs (preconditions uid and
// resourceVersion). Nothing held is not an error.
// GC: node-slice pools only (the allocations record no node otherwise): this node's allocations
// whose owner GC does not keep. IPAMClaim owners are never released by GC.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/k8s/client.hpp"
#include "ipam/cluster.hpp"
#include "ipam/ipam.hpp"
#include "ipam/whereabouts.hpp"

namespace plumb::ipam::cluster {

/// What the last add() or del() cost against the API server.
struct KubeStats {
  uint64_t requests = 0;  // HTTP attempts (retries included)
  int conflicts = 0;      // writes lost to another writer (422/409)
};

/// The default namespace of whereabouts' objects (whereabouts: the kubeconfig context's
/// namespace, else kube-system).
inline constexpr std::string_view kDefaultPoolNamespace = "kube-system";

/// The cluster IPAM on whereabouts' Kubernetes objects (see the file comment).
class KubeClusterIpam final : public Ipam {
 public:
  /// `ns`: the namespace of whereabouts' objects.
  KubeClusterIpam(Config cfg, std::string node, std::shared_ptr<k8s::Client> client, std::string ns);
  ~KubeClusterIpam() override;

  /// Allocates one address per range, or returns what container_id+ifname (or Request::owner)
  /// already holds. Errors: kIpamExhausted naming the range (nothing held afterwards),
  /// kIpamExhausted naming a requested address held by someone else and its holder,
  /// kTryAgainLater when contention outlasts the retries or the API server stays unreachable,
  /// kInvalidConfig for rejected credentials, the API server's other errors naming the object.
  [[nodiscard]] Result<cni::CniResult> add(const Request& req) override;
  /// Releases every address container_id+ifname (or Request::owner) holds. Nothing held is not
  /// an error. Errors: the API server unreachable (the caller keeps its record and retries).
  [[nodiscard]] Status del(const Request& req) override;
  /// Verifies container_id+ifname holds every address of prev. Errors: kNotFound naming it.
  [[nodiscard]] Status check(const Request& req, const cni::CniResult& prev) override;
  /// Node-slice pools: releases this node's allocations whose owner `keep` rejects (IPAMClaim
  /// owners kept). Other pools: nothing (their allocations name no node).
  [[nodiscard]] Status gc(const Request& req, const KeepFn& keep) override;
  [[nodiscard]] bool supports_owner() const override { return true; }

  [[nodiscard]] const KubeStats& last_stats() const { return stats_; }
  [[nodiscard]] const std::string& pool_namespace() const { return ns_; }
  [[nodiscard]] const Config& config() const { return cfg_; }

  struct Impl;

 private:
  Config cfg_;
  std::string node_;
  std::string ns_;
  std::shared_ptr<k8s::Client> client_;
  KubeStats stats_;
};

/// Builds the Kubernetes datastore IPAM for `node` with `client` (no request is made).
/// `ns`: whereabouts' namespace ("" = the client's credentials' namespace, else kube-system).
[[nodiscard]] std::unique_ptr<KubeClusterIpam> make_kube(Config cfg, const std::string& node,
                                                         std::shared_ptr<k8s::Client> client, const std::string& ns);

/// Builds it with plumb's credentials from `access` (its kubeconfig, else the in-cluster service
/// account), else the config's kubernetes.kubeconfig, on k8s::client_for's client (kept across
/// invocations in a daemon worker: k8s::keep_clients). Reads the kubeconfig file only. Errors:
/// kInvalidConfig when there are no credentials at all, naming what was looked for; the
/// kubeconfig's errors.
[[nodiscard]] Result<std::unique_ptr<KubeClusterIpam>> make_kube(Config cfg, const std::string& node,
                                                                 const ClusterAccess* access);

}  // namespace plumb::ipam::cluster
