// A small Kubernetes API client on engine/base/http and RapidJSON: credentials from a kubeconfig
// or the in-cluster service account, requests with timeouts, retries and a bearer token re-read
// from its file for every request (rotated service-account tokens keep working, multus-cni #852),
// and the answers' JSON objects. It knows the REST conventions (paths, Status answers, JSON merge
// and JSON patches, create/delete preconditions) but no resource: the pod source
// (cni-entry/source/kube.cpp) reads pods, NADs and IPAMClaims through it, the cluster IPAM
// (ipam/cluster_kube.cpp) whereabouts' IPPools, both on clients a daemon worker keeps across
// invocations (keep_clients, kept_clients.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/http.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/k8s/exec_credential.hpp"

namespace plumb::k8s {

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
  std::optional<ExecConfig> exec;  // exec: a credential plugin giving the token or client certificate
  std::string namespace_;        // the current context's namespace ("" = not set)
  std::string origin;            // for messages: "kubeconfig /etc/.. (context c)"

  bool operator==(const Credentials&) const = default;
};

/// Loads the credentials of a kubeconfig file: its current-context (or its only context when
/// current-context is unset) names a cluster (server, certificate-authority[-data],
/// insecure-skip-tls-verify), a user (token, tokenFile, client-certificate[-data],
/// client-key[-data], or exec: a credential plugin, exec_credential.hpp) and optionally a namespace. Relative file paths are taken relative to the
/// kubeconfig's directory, as kubectl does; files named are not read here (only when used).
/// Errors: kInvalidConfig naming the file and the field (missing context/cluster/user, no
/// server, bad base64, a client certificate without its key, a bad exec map, unsupported user
/// auth such as auth-provider); kIo when the file cannot be read; kDecode for bad YAML.
[[nodiscard]] Result<Credentials> load_kubeconfig(const std::string& path);

/// Reads a credential file (kubeconfig, token) whole. Errors: kIo naming the path, whatever the
/// reason (missing or unreadable).
[[nodiscard]] Result<std::string> read_credential_file(const std::string& path, std::string_view what);

/// The service-account directory a pod's containers get (in-cluster configuration).
inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

/// In-cluster credentials as client-go builds them: server https://<host>:<port> (an IPv6 host
/// is bracketed), CA <sa_dir>/ca.crt, bearer token <sa_dir>/token re-read on every request.
/// Errors: kInvalidConfig when host or port is empty or the port is not a number.
[[nodiscard]] Result<Credentials> in_cluster(const std::string& host, const std::string& port,
                                             const std::string& sa_dir = std::string(kServiceAccountDir));

/// plumb's rule for reaching the API server: the kubeconfig file when `kubeconfig` is set, else
/// the in-cluster service account when KUBERNETES_SERVICE_HOST (and _PORT, default 443) is in the
/// environment, else nullopt (no API server: the local store). Reads only the kubeconfig file.
/// Errors: load_kubeconfig's and in_cluster's.
[[nodiscard]] Result<std::optional<Credentials>> configured(const std::string& kubeconfig);

/// Timeouts and retries of every request (see engine/base/http.hpp for what is retried).
struct Options {
  std::chrono::milliseconds timeout{30000};     // one attempt, connection set-up included
  int retries = 3;                              // extra attempts after a transient failure
  std::chrono::milliseconds backoff{500};       // wait before the first retry, doubled each time
  std::chrono::milliseconds backoff_max{4000};  // cap of the wait

  bool operator==(const Options&) const = default;
};

/// Content types of the writes.
inline constexpr std::string_view kJson = "application/json";
inline constexpr std::string_view kMergePatch = "application/merge-patch+json";
inline constexpr std::string_view kJsonPatch = "application/json-patch+json";

/// Requests to one API server with its credentials: one HTTP client (connections are reused
/// within an invocation), the bearer token re-read from its file for every request, or taken
/// from the exec plugin (run again once when the API server answers 401). Not
/// thread-safe: one per thread.
class Client {
 public:
  Client(Credentials creds, Options opts);

  /// Sends `method path` (path starts with '/', query included) with an optional body of
  /// `content_type`, retried as http::Client::request does (`retries` -1: Options::retries);
  /// any HTTP status that is not retried, or still transient after the last retry, is returned
  /// as a Response. Errors: kTryAgainLater naming method, URL and curl's reason when the server
  /// stays unreachable; kInvalidConfig for TLS set-up/verification failures and an unreadable or
  /// empty token file (naming it).
  [[nodiscard]] Result<http::Response> request(std::string_view method, const std::string& path,
                                               const std::string& body = {}, std::string_view content_type = {},
                                               int retries = -1);

  /// The error for an unexpected HTTP answer: 401/403 kInvalidConfig (credentials rejected /
  /// not authorised), 404 kNotFound, 409 kConflict, 429/5xx kTryAgainLater, else kIo; the msg
  /// names `what`, method, URL, status and the API server's own message (in details).
  [[nodiscard]] Error http_error(std::string_view what, std::string_view method, const std::string& path,
                                 const http::Response& resp) const;

  /// GET of one object: nullopt on 404. Errors: http_error()'s for other statuses; kDecode when
  /// the answer is not a JSON object.
  [[nodiscard]] Result<std::optional<json::Document>> get(const std::string& path, const std::string& what);

  /// Every item of a collection (`path` without a query), read in pages of 500 following
  /// metadata.continue. Errors: http_error()'s; kDecode when an answer is not a list.
  [[nodiscard]] Result<std::vector<json::Document>> list(const std::string& path, const std::string& what);

  /// A collection's items and the list's metadata.resourceVersion (where a watch starts).
  struct List {
    std::vector<json::Document> items;
    std::string resource_version;
  };
  /// list() with the list's resourceVersion; `path` may carry a query (a fieldSelector).
  [[nodiscard]] Result<List> list_versioned(const std::string& path, const std::string& what);

  /// A streaming GET of `path` (a watch: newline-delimited JSON), one attempt, no retry: each
  /// complete non-empty line of a 200 answer goes to `on_line` as it arrives (false: stop
  /// reading; the connection is closed). Returns the HTTP status once the server ends the
  /// answer or `on_line` stops it; any other status's body (a Status object, up to 64 KiB) goes
  /// to `error_body`. The transfer is bounded by Options::timeout like any request. Errors:
  /// transport errors as request(); kDecode for a line over 16 MiB.
  [[nodiscard]] Result<long> stream_lines(const std::string& path,
                                          const std::function<bool(std::string_view line)>& on_line,
                                          std::string* error_body = nullptr);

  [[nodiscard]] const Credentials& credentials() const { return creds_; }
  /// HTTP attempts made so far (retries included), for cost checks.
  [[nodiscard]] uint64_t attempts() const { return retired_attempts_ + http_->attempts(); }

 private:
  /// The HTTP request of `method path` with the credentials' bearer token (re-read, or the exec
  /// plugin's) and Accept: application/json. Errors: as request()'s for the token.
  Result<http::Request> prepare(std::string_view method, const std::string& path, const std::string& body,
                                std::string_view content_type);

  static constexpr size_t kMaxLine = size_t{16} << 20;        ///< a watch event's line, at most
  static constexpr size_t kMaxStatusBody = size_t{64} << 10;  ///< a non-200 answer's body kept, at most

  /// The exec plugin's bearer token ("" with a certificate), its client certificate put in
  /// place (the HTTP client rebuilt when it changed); `refresh` after a 401, as client-go.
  Result<std::string> exec_token(bool refresh);

  Credentials creds_;
  Options opts_;
  std::unique_ptr<http::Client> http_;
  uint64_t retired_attempts_ = 0;  // attempts of HTTP clients replaced for a new exec certificate
};

/// With `on`, client_for() keeps the clients it makes in this process, one per credentials and
/// options (a change of either gives a new client; a few are kept, the least recently used
/// dropped first), so a `plumb daemon` worker's invocations (the pod source, the cluster IPAM)
/// reuse an open connection instead of each opening one (a TCP and TLS handshake). A kept client
/// belongs to the process that made it: a process forked after that never uses it (its
/// connection is the parent's) nor closes it, and makes its own. A kept connection the server
/// has closed is replaced by libcurl, which retries the request on a new one (and http::Client
/// retries transient failures). Off (the default, and an exec'd plumb's: one invocation per
/// process): each client_for() makes a new client; `on` false also drops the kept ones.
void keep_clients(bool on);

/// A client of `creds` with `opts`: the kept one of this process when keeping (keep_clients)
/// and one was made with equal credentials and options, else a new one (kept when keeping).
/// Shared: used by one thread at a time, as Client.
[[nodiscard]] std::shared_ptr<Client> client_for(Credentials creds, Options opts);

/// The answer's body as a JSON object. Errors: kDecode naming `what`.
[[nodiscard]] Result<json::Document> object_of(const http::Response& resp, const std::string& what);
/// RFC 3986 percent-encoding of a query value (continue tokens, field selectors).
[[nodiscard]] std::string query_escape(std::string_view s);
/// metadata.<key> of an object as a string ("" when absent or not a string).
[[nodiscard]] std::string meta_string(const json::Value& obj, std::string_view key);
/// The "reason" of a Status answer ("AlreadyExists", "Conflict", "Invalid"...; "" when the body
/// is not a Status).
[[nodiscard]] std::string status_reason(const http::Response& resp);

}  // namespace plumb::k8s
