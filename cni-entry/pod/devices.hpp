// Device IDs from kubelet for the attachments whose NetworkAttachmentDefinition names a device
// resource (k8s.v1.cni.cncf.io/resourceName), as Multus assigns them (pkg/k8sclient
// getKubernetesDelegate, pkg/types LoadDelegateNetConf): one pod-resources lookup per ADD
// (cni-entry/source/kubelet.hpp), the resource's sorted device IDs handed to the pod's
// attachments of that resource in attachment order (the default network, defaultNetworks, then
// the selection annotation's elements): two networks of one resource get two different devices.
// Part of the plan: everything here happens before the first change to the node.
#pragma once

#include <vector>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/plan.hpp"
#include "cni-entry/source/kubelet.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::pod {

/// Sets Attachment::device_id of every attachment whose network has a resource_name, from `devices`
/// (kubelet's allocation for `pod`). Errors (kInvalidConfig, naming the resource, the pod and the
/// networks): a resource kubelet allocated nothing of to the pod; fewer devices of a resource than
/// networks using it.
[[nodiscard]] Status hand_out_devices(std::vector<Attachment>& atts, const source::PodDevices& devices,
                                      const source::PodRef& pod);

/// Asks kubelet (plumb config podResourcesSocket, podResourcesTimeoutSeconds) for the pod's devices
/// and hands them out (hand_out_devices) when some attachment has a resource_name; does nothing
/// (and loads nothing) otherwise. Errors: kInvalidEnv without a pod name (K8S_POD_NAME); kubelet's
/// (source::pod_devices) prefixed with the resources and the pod; hand_out_devices'.
[[nodiscard]] Status assign_device_ids(std::vector<Attachment>& atts, const PlumbConfig& conf, const source::PodRef& pod);

/// Puts att.device_id into att.plugins as Multus does: "deviceID" and "pciBusID" in every plugin's
/// config, and runtimeConfig.deviceID in every plugin declaring the "deviceID" capability (both
/// replacing what was there). Nothing when att.device_id is "".
void inject_device_id(Attachment& att);

}  // namespace plumb::pod
