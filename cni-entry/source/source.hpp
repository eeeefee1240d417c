// Where pods' annotations and NetworkAttachmentDefinitions come from, and where network-status
// goes. One interface: the embedded local store, or the Kubernetes API server (kube.hpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"
#include "cni-entry/npwg/nad.hpp"

namespace plumb::source {

/// A pod reference: namespace and name (K8S_POD_NAMESPACE, K8S_POD_NAME).
struct PodRef {
  std::string namespace_;
  std::string name;
  std::string uid;  // K8S_POD_UID, "" if not given
};

/// What a source knows about a pod (Multus reads the same from the API server).
struct PodInfo {
  std::map<std::string, std::string> annotations;  // metadata.annotations
  std::string uid;                // metadata.uid; "" when the source does not know it (local store)
  std::string resource_version;   // metadata.resourceVersion; "" when unknown
  /// A static pod's mirror: annotation kubernetes.io/config.source present and not "api". Its
  /// API object has another UID than the one the kubelet passes in K8S_POD_UID.
  bool is_static = false;
};

/// An IPAMClaim (spec 8.2, ipamclaims.k8s.cni.cncf.io/v1alpha1): what plumb uses of it.
struct IpamClaim {
  std::string namespace_;
  std::string name;
  std::string network;            // spec.network ("" if absent)
  std::string interface;          // spec.interface ("" if absent)
  std::vector<std::string> ips;   // status.ips as written ("192.0.2.5/24"); empty: none allocated yet
};

/// What plumb writes into an IPAMClaim's status once it allocated the claim's addresses.
struct IpamClaimStatus {
  std::vector<std::string> ips;  // status.ips: CIDR strings
  std::string owner_pod;         // status.ownerPod.name: the pod the addresses were allocated for
  std::string allocated_at;      // RFC 3339 UTC time of the allocation (the condition's lastTransitionTime)
};

/// `status` as ipamclaims v1alpha1 writes it: {"ips": [..], "ownerPod": {"name": ..},
/// "conditions": [{"type": "IPsAllocated", "status": "True", "reason": "SuccessfulAllocation",
/// "message": .., "lastTransitionTime": ..}]} (the condition OVN-Kubernetes sets); ownerPod left
/// out without a pod name.
[[nodiscard]] json::Document ipam_claim_status_json(const IpamClaimStatus& status);

/// A Kubernetes Event about a pod (events.k8s.io/v1), as Multus posts them.
struct PodEvent {
  bool warning = false;  ///< type Warning (else Normal)
  std::string reason;    ///< "AddedInterface"
  std::string action;    ///< what was done or failed: "AddInterface"
  std::string note;      ///< "Add net1 [192.0.2.5/24] from default/blue"
};

class PodSource {
 public:
  virtual ~PodSource() = default;
  /// The pod as the source knows it: annotations, UID, whether static. nullopt when the source
  /// has no such pod and that is normal for it (the local store: a pod without a manifest). The
  /// API server's 404 is an error (kNotFound naming the pod): a pod being set up must exist.
  /// The default implementation wraps pod_annotations() (uid unknown, not static).
  /// Errors: as pod_annotations(); the API server's transport/auth errors (see kube.hpp).
  [[nodiscard]] virtual Result<std::optional<PodInfo>> pod(const PodRef& pod);
  /// The IPAMClaim `namespace_/name`; nullopt when it does not exist (deleted claims release
  /// their addresses at GC). Default: kInvalidConfig (the source has no claims).
  [[nodiscard]] virtual Result<std::optional<IpamClaim>> ipam_claim(const std::string& namespace_, const std::string& name);
  /// Records `status` as the claim's status (spec 8: the IPAM writes the addresses it allocated
  /// for the claim; ipamclaims v1alpha1's ownerPod and conditions with them; ipam_claim_status_json).
  /// Errors: kNotFound when the claim is gone; kConflict when another writer set different
  /// status.ips meanwhile; transport errors.
  [[nodiscard]] virtual Status write_ipam_claim_status(const std::string& namespace_, const std::string& name,
                                                       const IpamClaimStatus& status);
  /// Posts `events` about the pod, reported by `instance` (plumb on its node). Default: none (the
  /// local store has nowhere to post them). Errors: the first failed post's (the others are
  /// still tried); callers log it, an ADD never fails for an Event.
  [[nodiscard]] virtual Status post_events(const PodRef& pod, const std::vector<PodEvent>& events,
                                           const std::string& instance);
  /// Whether post_events() posts anything (the API server); false (the local store): an ADD
  /// leaves no Events to post after its answer.
  [[nodiscard]] virtual bool posts_events() const { return false; }
  /// Whether write_network_status() is a request to a server (the API server), which
  /// statusAfterAnswer may move after the runtime's answer; false (the local store): a local file,
  /// written before the answer.
  [[nodiscard]] virtual bool status_is_remote() const { return false; }
  /// write_network_status() for a write made after the runtime's answer, when the sandbox may have
  /// been deleted meanwhile: `current` (true while the sandbox's attachments are recorded) is
  /// asked before each write request, after the pod was read; the API server source makes the
  /// request with the resourceVersion of that read as precondition and starts again (read, ask,
  /// write) after a 409. So a write that a DEL and the next sandbox's status write overtook is
  /// refused by the API server, and then never made. Returns false when `current` said no
  /// (nothing written). Default: asks `current` once, then write_network_status(). Errors: as
  /// write_network_status().
  [[nodiscard]] virtual Result<bool> write_network_status_if(const PodRef& pod, const std::string& status_json,
                                                             const std::string& owner,
                                                             const std::function<bool()>& current);
  /// CNI STATUS: whether the source can serve an ADD now. Default: ready. Errors carry code
  /// kPluginNotAvailable (50: unusable, e.g. credentials rejected) or kPluginNotReady (51: the
  /// API server cannot be reached) and the reason.
  [[nodiscard]] virtual Status ready();
  /// A short description for logs: "local store /etc/plumb/store", "API server https://..".
  [[nodiscard]] virtual std::string describe() const { return "pod source"; }
  /// Warnings gathered since the last call (a malformed file the local store skipped), for the
  /// caller to log; cleared. Default: none.
  [[nodiscard]] virtual std::vector<std::string> take_warnings() { return {}; }
  /// The pod's annotations; nullopt when the source has no such pod (not an error: a pod with
  /// no entry has no selection annotation). Errors: I/O or decode errors naming the file.
  [[nodiscard]] virtual Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const PodRef& pod) = 0;
  /// The NAD `namespace_/name`. Errors: kNotFound naming "namespace/name".
  [[nodiscard]] virtual Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string& namespace_,
                                                                                     const std::string& name) = 0;
  /// Publishes the pod's network-status annotation value (JSON text), written by the sandbox
  /// `owner` ("<containerID>:<CNI_IFNAME>", state::Key::name()). The API server source patches pods/status with the pod's UID
  /// (and resourceVersion once read) as preconditions and re-reads and retries on a conflict; a
  /// replaced pod is kConflict, never written to.
  [[nodiscard]] virtual Status write_network_status(const PodRef& pod, const std::string& status_json,
                                                    const std::string& owner) = 0;
  /// Removes the published network-status (DEL, GC) when `owner` wrote it (or, for a status an
  /// older plumb wrote, the owner's container ID alone): a stale
  /// sandbox's DEL (containerd and the kubelet repeat DEL for old sandboxes) leaves the status of
  /// the pod's current sandbox alone. Absent is not an error. The API server source makes no
  /// request here: DEL never depends on the API server (multus-cni #586), and the pod object is
  /// being deleted or gets a new status with the next sandbox's ADD.
  [[nodiscard]] virtual Status remove_network_status(const PodRef& pod, const std::string& owner) = 0;
  /// GC: removes every published network-status whose owner ("<containerID>:<ifname>", or a
  /// bare container ID) `vouched` does not vouch for (no record of it is left: a DEL killed after
  /// its records went). A status without a recorded owner (an older plumb's) stays. Returns the
  /// pods ("namespace/name") whose status went. Default (the API server source): none, no
  /// request, as remove_network_status(). Errors: the first I/O error; the other pods are still
  /// tried.
  [[nodiscard]] virtual Result<std::vector<std::string>> remove_unvouched_status(
      const std::function<bool(std::string_view owner)>& vouched);
};

/// The embedded default: a directory laid out as
///   <root>/nads/*.yaml|*.yml|*.json   NADs as `kubectl` takes them (several documents per file)
///   <root>/pods/<namespace>/<name>.yaml   a Pod manifest (only metadata.annotations is read)
///   <root>/status/<namespace>/<name>.json the network-status annotation plumb wrote (ADD), removed on DEL
///   <root>/status/<namespace>/<name>.owner "<containerID>:<ifname>" of the attachments that wrote it
///                                         (only their DEL/GC removes the status)
///   <root>/.plumb-recycled/                 removed status files, renamed into place for the next
///                                         pods instead of new files (engine/base/recycler.hpp)
/// Namespaces, names and the file names built from them are validated (DNS-1123) before any path
/// is formed.
///   <root>/ipamclaims/<namespace>/<name>.yaml  an IPAMClaim manifest (spec.network/interface,
///                                             optional status.ips)
///   <root>/ipamclaims/<namespace>/<name>.status.json  the status.ips plumb wrote ({"ips":[..]});
///                                             removed once the manifest is gone
[[nodiscard]] std::unique_ptr<PodSource> make_local_store(const std::string& root);

/// The annotations an ADD works with, Multus's lookup minus its extra requests: the map the
/// runtime handed over (io.kubernetes.cri.pod-annotations, `from_runtime`) is used as is, with no
/// request to the source at all (it comes with the sandbox being created, so there is nothing
/// to cross-check); otherwise the pod is read from `src` and, when `pod.uid` (K8S_POD_UID) is
/// set and the source knows the pod's UID, a different UID fails unless the pod is static.
/// nullopt: no pod name, or the source has no such pod. Errors: the source's; kInvalidEnv
/// "expected pod UID .. but the API server has .." for a UID mismatch.
[[nodiscard]] Result<std::optional<std::map<std::string, std::string>>> annotations_for_add(
    PodSource& src, const PodRef& pod, const std::optional<std::map<std::string, std::string>>& from_runtime);


}  // namespace plumb::source
