// kubeconfig users with an exec credential plugin (client.authentication.k8s.io v1 and v1beta1
// ExecCredential, as EKS, GKE and AKS write them), run as client-go runs them: the command (a
// bare name searched in PATH, a relative path with a '/' taken from the kubeconfig's directory)
// with its args, this process's environment plus the config's env and KUBERNETES_EXEC_INFO, no
// terminal (interactiveMode Never or IfAvailable; Always cannot be served), its token or client
// certificate kept until expirationTimestamp.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::k8s {

/// A user's "exec" map.
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      // resolved: absolute, or a bare name searched in PATH when run
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // env: [{name, value}], in order
  bool provide_cluster_info = false;                     // provideClusterInfo: spec.cluster in KUBERNETES_EXEC_INFO

  bool operator==(const ExecConfig&) const = default;
};

/// The cluster as KUBERNETES_EXEC_INFO's spec.cluster gives it to the plugin.
struct ExecCluster {
  std::string server;
  std::string ca_pem;  // certificate-authority-data (PEM; base64-encoded in the JSON)
  bool insecure_skip_tls_verify = false;
};

/// What the plugin returned (its ExecCredential's status).
struct ExecCredential {
  std::string token;           // bearer token; "" with a client certificate
  std::string client_cert_pem;  // clientCertificateData
  std::string client_key_pem;   // clientKeyData
  std::optional<std::time_t> expires;  // expirationTimestamp; nullopt = kept for the process's life
};

/// Parses a user's "exec" map (`dir`: the kubeconfig's directory). Errors: kInvalidConfig naming
/// `where` and the key: no command, an apiVersion that is not v1/v1beta1, v1 without
/// interactiveMode, interactiveMode Always (plumb never has a terminal) or unknown, bad env.
[[nodiscard]] Result<ExecConfig> parse_exec(const json::Value& exec, const std::string& dir, const std::string& where);

/// The credential for `cfg`: the one kept from an earlier run while it has not expired (keyed
/// by the whole config and the server), else the plugin's fresh answer; `refresh` skips what is
/// kept (the API server rejected it: client-go runs the plugin again on a 401).
/// Errors: kInvalidConfig naming the command: not found, exited non-zero (its stderr in the
/// message), killed at 60 s, an answer that is not an ExecCredential of cfg.api_version with a
/// token or a certificate and key, a bad expirationTimestamp.
[[nodiscard]] Result<ExecCredential> exec_credential(const ExecConfig& cfg, const ExecCluster& cluster, bool refresh = false);

}  // namespace plumb::k8s
