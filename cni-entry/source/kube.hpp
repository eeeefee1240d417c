// The Kubernetes API server as a PodSource: on the API client of engine/k8s, it reads pods,
// NetworkAttachmentDefinitions and IPAMClaims and writes the network-status annotation
// (pods/status) and IPAMClaim status.ips. It avoids Multus's best-known failures: timeouts and
// retries are configurable with generous defaults (multus-cni #1461), bearer tokens are re-read
// from their file on every request so rotated service-account tokens keep working (#852), and
// DEL makes no request at all (#586).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "engine/base/result.hpp"
#include "engine/k8s/client.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::source::kube {

// Credentials, kubeconfig / in-cluster loading and request options live in engine/k8s (the
// cluster IPAM uses them too); these names are the ones the front always used.
using k8s::Credentials;
using k8s::in_cluster;
using k8s::kServiceAccountDir;
using k8s::load_kubeconfig;
using k8s::Options;

/// The pod annotation plumb writes with network-status: the container ID of the sandbox whose
/// ADD wrote it (`plumb reconcile` reads it).
inline constexpr std::string_view kSandboxAnnotation = "plumb/sandbox";

/// The API server as a PodSource. Paths: pods /api/v1/namespaces/{ns}/pods/{name} (status
/// through .../status), NADs /apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-
/// definitions/{name}, IPAMClaims /apis/k8s.cni.cncf.io/v1alpha1/namespaces/{ns}/ipamclaims/
/// {name} (status through .../status). Writes are JSON merge patches carrying metadata.uid and
/// metadata.resourceVersion as preconditions when known; a 409 re-reads the object and retries.
/// ready() lists NADs in `probe_namespace` (limit 1) with a single attempt: unreachable gives
/// kPluginNotReady (51), rejected credentials or missing permission kPluginNotAvailable (50).
/// Its client is k8s::client_for's: kept across invocations in a daemon worker (k8s::keep_clients).
[[nodiscard]] std::unique_ptr<PodSource> make_kube_source(Credentials creds, Options opts, std::string probe_namespace);

}  // namespace plumb::source::kube
