// The pod's default networks as Multus chooses them (internal to cni-entry/pod; plan.cpp uses
// it): the cluster default network — the pod's v1.multus-cni.io/default-network annotation, else
// clusterNetwork (a NAD in multusNamespace, else a CNI config of that name in confDir, or a file
// or directory path), else the first of `delegates` — then the other delegates (when
// clusterNetwork is not set) and defaultNetworks (not for pods in systemNamespaces).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::pod {

/// The annotation that replaces the cluster default network for one pod (Multus).
inline constexpr std::string_view kDefaultNetworkAnnotation = "v1.multus-cni.io/default-network";

/// The attachment of NAD `ns/name` (spec 3.4.1 resolution), its
/// k8s.v1.cni.cncf.io/resourceName kept for device-info (5.3.8); selection and status name
/// "ns/name". Errors: the source's (kNotFound naming the NAD); resolve's.
[[nodiscard]] Result<Attachment> nad_attachment(source::PodSource& store, const PlumbConfig& conf, const std::string& ns,
                                                const std::string& name);

/// Resolves a clusterNetwork/defaultNetworks reference: an absolute path (a .conf/.conflist file,
/// or a directory's first config), else a NAD ("name" in multusNamespace, or "namespace/name"),
/// else — for a plain name — the CNI config whose "name" it is in confDir (Multus's
/// getNetDelegate order). `qualified` gets "namespace/name" for a NAD, "" otherwise.
/// Errors: kNotFound naming the reference, the NAD and the directory; the source's errors.
[[nodiscard]] Result<nad::ResolvedNetwork> resolve_reference(source::PodSource& store, const PlumbConfig& conf,
                                                             const std::string& ref, std::string* qualified);

/// The cluster default network without a pod's annotation (also what STATUS checks):
/// clusterNetwork, else delegates[0]. `qualified` (optional) as for resolve_reference.
/// Errors: kInvalidConfig when neither clusterNetwork nor delegates is set; resolve_reference's
/// prefixed with "plumb config.clusterNetwork".
[[nodiscard]] Result<nad::ResolvedNetwork> cluster_default(source::PodSource& store, const PlumbConfig& conf,
                                                           std::string* qualified = nullptr);

/// The default attachments of `pod` (annotations as read for the ADD, if any), in order, the
/// cluster default network first (ifname = CNI_IFNAME); the others have no ifname yet.
/// Errors: kInvalidConfig/kInvalidAnnotation naming the key or annotation; resolve_reference's.
[[nodiscard]] Result<std::vector<Attachment>> default_attachments(const cni::Env& env, const PlumbConfig& conf,
                                                                  source::PodSource& store, const source::PodRef& pod,
                                                                  const std::map<std::string, std::string>* annotations);

}  // namespace plumb::pod
