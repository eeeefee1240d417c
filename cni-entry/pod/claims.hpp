// IPAMClaims (NPWG v1.3 section 8, selection key "ipam-claim-reference"): an attachment's
// addresses held on behalf of a claim instead of the pod, re-used by the next pod naming the
// claim, released only once the claim is gone (at GC). Works with any PodSource: the API server
// (ipamclaims.k8s.cni.cncf.io/v1alpha1) or the local store (<store>/ipamclaims/).
//
// How: the attachment's IPAM gets the claim as ipam::Request::owner ("ipamclaim:<ns>/<name>")
// and owner_ips (status.ips when set), through drivers::Context::ipam_owner: host-local or the
// cluster IPAM then holds the addresses for the claim (so a pod's DEL, which releases by container
// ID, leaves them alone) and requests status.ips. With the cluster IPAM the claim's addresses
// live in the cluster's pool, so the claim follows the pod to any node. Each claimed
// allocation is recorded under <stateDir>/ipamclaims/<ns>/<claim>/<network>.json before any
// address is taken, so GC can release it once the claim no longer exists.
#pragma once

#include <optional>
#include <string>

#include "drivers/driver.hpp"
#include "engine/cni/cni.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/log.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::pod::claims {

/// The claim one attachment uses.
struct Use {
  std::string namespace_;  // the claim's (= the pod's) namespace
  std::string name;        // the claim's name
  std::string owner;       // "ipamclaim:<namespace>/<name>": the IPAM's owner id (Request::owner)
  std::vector<std::string> ips;  // the claim's status.ips (Request::owner_ips); empty: none yet
  bool had_ips = false;    // status.ips was set: those addresses are re-used, nothing to write
};

/// Prepares one planned attachment: for a selection element with ipam-claim-reference, the claim
/// is read from `src` in `pod_namespace` and, for every plugin of `parsed` whose IPAM can hold
/// addresses for an owner (ipam::Ipam::supports_owner: host-local, the cluster IPAM), recorded for GC under
/// `state_dir` before any address is taken. A network with no such IPAM ignores the claim (spec
/// 4.1.2.1.11: delegates that do not implement it ignore it) with a warning in `log`. Returns the
/// claim in use, or nullopt. Errors: kNotFound naming the claim when it does not exist; the
/// source's errors; kIo for the GC record.
[[nodiscard]] Result<std::optional<Use>> prepare(source::PodSource& src, const std::string& state_dir,
                                                 const std::string& pod_namespace, const nad::SelectionElement* element,
                                                 const std::vector<drivers::ParsedPlugin>& parsed, const std::string& network,
                                                 Log& log);

/// After the attachment came up: when the claim had no status.ips, writes its status as
/// ipamclaims v1alpha1 defines it: the addresses (CIDR, "192.0.2.5/24") as status.ips, pod
/// `pod_name` as status.ownerPod, the condition IPsAllocated (source::ipam_claim_status_json).
/// Errors: the source's (a claim deleted meanwhile is kNotFound; different status.ips set by
/// another writer kConflict).
[[nodiscard]] Status publish(source::PodSource& src, const Use& use, const cni::CniResult& result, const std::string& pod_name);

/// GC: for every recorded claim that `src` says no longer exists, releases the addresses its
/// IPAM holds for it (host-local; the cluster IPAM through `cluster`) and drops the record;
/// claims that exist, or that cannot be looked up (logged), are kept. Returns the first error
/// (lookup or release); records are processed on.
[[nodiscard]] Status gc(source::PodSource& src, const std::string& state_dir, const ipam::ClusterAccess& cluster, Log& log);

}  // namespace plumb::pod::claims
