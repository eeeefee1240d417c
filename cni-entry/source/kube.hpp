// The Kubernetes API server as a PodSource: a small client on engine/base/http and RapidJSON that
// reads pods, NetworkAttachmentDefinitions and IPAMClaims and writes the network-status
// annotation (pods/status) and IPAMClaim status.ips. It avoids Multus's best-known failures:
// timeouts and retries are configurable with generous defaults (multus-cni #1461), bearer
// tokens are re-read from their file on every request so rotated service-account tokens keep
// working (#852), and DEL makes no request at all (#586).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "engine/base/result.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::source::kube {

/// Where the API server is and how plumb authenticates to it.
struct Credentials {
  std::string server;   // "https://host:port" (no trailing '/')
  std::string ca_file;  // certificate-authority: PEM file; "" = none
  std::string ca_pem;   // certificate-authority-data, decoded PEM; "" = none
  bool insecure_skip_tls_verify = false;
  std::string client_cert_file;  // client-certificate: PEM file; "" = none
  std::string client_cert_pem;   // client-certificate-data, decoded; "" = none
  std::string client_key_file;   // client-key: PEM file; "" = none
  std::string client_key_pem;    // client-key-data, decoded; "" = none
  std::string token;             // token: a fixed bearer token; "" = none
  std::string token_file;        // tokenFile: re-read on every request; "" = none
  std::string origin;            // for messages: "kubeconfig /etc/.. (context c)"
};

/// Loads the credentials of a kubeconfig file: its current-context (or its only context when
/// current-context is unset) names a cluster (server, certificate-authority[-data],
/// insecure-skip-tls-verify) and a user (token, tokenFile, client-certificate[-data],
/// client-key[-data]). Relative file paths are taken relative to the kubeconfig's directory, as
/// kubectl does; files named are not read here (only when used). Errors: kInvalidConfig naming
/// the file and the field (missing context/cluster/user, no server, bad base64, a client
/// certificate without its key, unsupported user auth such as exec or auth-provider); kIo when
/// the file cannot be read; kDecode for bad YAML.
[[nodiscard]] Result<Credentials> load_kubeconfig(const std::string& path);

/// The service-account directory a pod's containers get (in-cluster configuration).
inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

/// In-cluster credentials as client-go builds them: server https://<host>:<port> (an IPv6 host
/// is bracketed), CA <sa_dir>/ca.crt, bearer token <sa_dir>/token re-read on every request.
/// Errors: kInvalidConfig when host or port is empty or the port is not a number.
[[nodiscard]] Result<Credentials> in_cluster(const std::string& host, const std::string& port,
                                             const std::string& sa_dir = std::string(kServiceAccountDir));

/// Timeouts and retries of every request (see engine/base/http.hpp for what is retried).
struct Options {
  std::chrono::milliseconds timeout{30000};     // one attempt, connection set-up included
  int retries = 3;                              // extra attempts after a transient failure
  std::chrono::milliseconds backoff{500};       // wait before the first retry, doubled each time
  std::chrono::milliseconds backoff_max{4000};  // cap of the wait
};

/// The API server as a PodSource. Paths: pods /api/v1/namespaces/{ns}/pods/{name} (status
/// through .../status), NADs /apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-
/// definitions/{name}, IPAMClaims /apis/k8s.cni.cncf.io/v1alpha1/namespaces/{ns}/ipamclaims/
/// {name} (status through .../status). Writes are JSON merge patches carrying metadata.uid and
/// metadata.resourceVersion as preconditions when known; a 409 re-reads the object and retries.
/// ready() lists NADs in `probe_namespace` (limit 1) with a single attempt: unreachable gives
/// kPluginNotReady (51), rejected credentials or missing permission kPluginNotAvailable (50).
[[nodiscard]] std::unique_ptr<PodSource> make_kube_source(Credentials creds, Options opts, std::string probe_namespace);

}  // namespace plumb::source::kube
