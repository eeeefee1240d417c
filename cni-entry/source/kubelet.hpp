// Device IDs kubelet allocated to a pod, from kubelet's pod-resources API (gRPC service
// v1.PodResourcesLister on a unix socket), as Multus reads them (pkg/kubeletclient) for the
// networks whose NetworkAttachmentDefinition names a device resource
// (k8s.v1.cni.cncf.io/resourceName): the device plugin (e.g. sriov-network-device-plugin) hands
// kubelet a VF per resource request, and the network must attach exactly that VF.
//
// Here, in cni-entry/source, because it is one more place facts about the pod come from, next to
// the API server and the local store; the orchestrator's plan asks it before the first change.
//
// Cost: nothing unless called. The call loads libcurl (engine/base/lazy_libs.cpp, HTTP/2 over
// the unix socket through nghttp2, engine/base/grpc.hpp) and plumb-podresources.so (the protobuf
// code generated from podresources/api.proto against Debian's libprotobuf-lite, carried inside the
// plumb binary: engine/base/embedded_lib.hpp).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "cni-entry/source/source.hpp"
#include "engine/base/result.hpp"

namespace plumb::source {

/// kubelet's pod-resources socket when plumb's config does not name one (podResourcesSocket).
inline constexpr const char* kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// Where kubelet is and how long plumb waits for it.
struct KubeletOptions {
  std::string socket = kDefaultPodResourcesSocket;  ///< plumb config podResourcesSocket
  std::chrono::milliseconds timeout{10000};          ///< the whole lookup (Get, and List after it); Multus: 10 s
};

/// Device IDs by resource name ("intel.com/sriov_netdevice" -> {"0000:03:00.2", ...}), every
/// container of the pod together, each list sorted (Multus sorts them, so every consumer of the
/// pod's resources hands out the same device to the same network).
using PodDevices = std::map<std::string, std::vector<std::string>>;

/// The devices kubelet allocated to `pod`: v1 Get for the pod (Kubernetes 1.27+ with the
/// KubeletPodResourcesGet feature gate, default on from 1.34); when Get gives no answer for the pod
/// (Unimplemented from an older kubelet, Unknown with the gate off or for a pod Get does not know,
/// any other failure short of the timeout), v1 List, keeping the entries of
/// pod.namespace_/pod.name. A pod kubelet does not list has no devices (an empty map).
/// Errors (messages name the socket and the pod):
///   kTryAgainLater  the socket does not exist, refuses the connection, or kubelet does not answer
///                   within opts.timeout (the message names podResourcesSocket / podResourcesTimeoutSeconds)
///   kIo             List's answer is not a valid pod-resources reply, or another gRPC status
///   kInternal       plumb-podresources.so or a library it needs (libprotobuf-lite.so.32) cannot be loaded
[[nodiscard]] Result<PodDevices> pod_devices(const KubeletOptions& opts, const PodRef& pod);

}  // namespace plumb::source
