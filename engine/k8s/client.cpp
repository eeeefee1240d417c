// The Kubernetes API client (see client.hpp): requests with the credentials' TLS settings and
// bearer token, retries, and the mapping of HTTP answers to plumb errors.
#include "engine/k8s/client.hpp"

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"

namespace plumb::k8s {

Result<std::string> read_credential_file(const std::string& path, std::string_view what) {
  auto text = read_file(path, what);
  if (!text) {
    Error e = text.error();
    e.cni_code = cni_code::kIo;  // a credential file that cannot be read, missing or not
    return std::unexpected(e);
  }
  return text;
}

namespace {

using http::Response;

/// The HTTP client options of an API server: its TLS settings, the per-attempt timeout and
/// the retry policy of Options (retries after the first attempt, backoff doubling to the cap).
http::Options http_options(const Credentials& creds, const Options& opts) {
  http::Options o;
  o.tls.ca_file = creds.ca_file;
  o.tls.ca_pem = creds.ca_pem;
  o.tls.cert_file = creds.client_cert_file;
  o.tls.cert_pem = creds.client_cert_pem;
  o.tls.key_file = creds.client_key_file;
  o.tls.key_pem = creds.client_key_pem;
  o.tls.insecure_skip_verify = creds.insecure_skip_tls_verify;
  o.timeout = opts.timeout;
  o.retry.max_attempts = opts.retries + 1;
  o.retry.backoff = opts.backoff;
  o.retry.backoff_max = opts.backoff_max;
  o.peer = "the API server";
  o.observed_as = "api";
  return o;
}

}  // namespace

Client::Client(Credentials creds, Options opts)
    : creds_(std::move(creds)), opts_(opts), http_(std::make_unique<http::Client>(http_options(creds_, opts_))) {}

Result<std::string> Client::exec_token(bool refresh) {
  ExecCluster cluster{creds_.server, creds_.ca_pem, creds_.insecure_skip_tls_verify};
  if (cluster.ca_pem.empty() && !creds_.ca_file.empty() && creds_.exec->provide_cluster_info) {
    cluster.ca_pem = PLUMB_TRY(read_credential_file(creds_.ca_file, "certificate-authority"));
  }
  auto cred = exec_credential(*creds_.exec, cluster, refresh);
  if (!cred) return std::unexpected(cred.error().within(creds_.origin));
  if (cred->client_cert_pem != creds_.client_cert_pem || cred->client_key_pem != creds_.client_key_pem) {
    creds_.client_cert_pem = cred->client_cert_pem;
    creds_.client_key_pem = cred->client_key_pem;
    retired_attempts_ += http_->attempts();
    http_ = std::make_unique<http::Client>(http_options(creds_, opts_));
  }
  return cred->token;
}

Result<http::Request> Client::prepare(std::string_view method, const std::string& path, const std::string& body,
                                      std::string_view content_type) {
  http::Request req;
  req.method = method;
  req.url = creds_.server + path;
  req.body = body;
  req.content_type = content_type;
  const std::string what = req.method + " " + req.url;
  std::string token = creds_.token;
  if (creds_.exec) token = PLUMB_TRY(exec_token(false));
  if (!creds_.token_file.empty()) {
    // Re-read on every request: service-account tokens are rotated under our feet.
    auto t = read_credential_file(creds_.token_file, "token file");
    if (!t)
      return fail(cni_code::kInvalidConfig, what + ": cannot read the bearer token (" + creds_.origin + ")",
                  t.error().text());
    token = std::string(text::trim(*t));
    if (token.empty()) return fail(cni_code::kInvalidConfig, what + ": token file " + creds_.token_file + " is empty");
  }
  if (token.find_first_of("\r\n") != std::string::npos)
    return fail(cni_code::kInvalidConfig, what + ": the bearer token contains a line break (" + creds_.origin + ")");
  req.headers.push_back("Accept: application/json");
  if (!token.empty()) req.headers.push_back("Authorization: Bearer " + token);
  return req;
}

Result<Response> Client::request(std::string_view method, const std::string& path, const std::string& body,
                                 std::string_view content_type, int retries) {
  http::Request req = PLUMB_TRY(prepare(method, path, body, content_type));
  http::RetryPolicy policy = http_->options().retry;
  if (retries >= 0) policy.max_attempts = retries + 1;
  auto resp = http_->request(req, policy);
  if (resp && resp->status == 401 && creds_.exec) {
    // The plugin's credential was refused before it expired (revoked, rotated): ask it again.
    const std::string token = PLUMB_TRY(exec_token(true));
    req.headers.resize(1);
    if (!token.empty()) req.headers.push_back("Authorization: Bearer " + token);
    resp = http_->request(req, policy);
  }
  if (!resp && resp.error().cni_code == cni_code::kInvalidConfig) resp.error().msg += " (" + creds_.origin + ")";
  return resp;
}

Result<long> Client::stream_lines(const std::string& path, const std::function<bool(std::string_view line)>& on_line,
                                  std::string* error_body) {
  http::Request req = PLUMB_TRY(prepare("GET", path, {}, {}));
  std::string pending;
  bool stopped = false;
  // Lines only when the answer is 200: any other status's body is a Status object, kept whole.
  req.on_body = [&](long status, std::string_view chunk) {
    pending.append(chunk);
    if (status != 200) return pending.size() <= kMaxStatusBody;
    size_t start = 0;
    for (size_t nl; !stopped && (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (nl > start && !on_line(std::string_view(pending).substr(start, nl - start))) stopped = true;
    }
    pending.erase(0, start);
    return !stopped && pending.size() <= kMaxLine;
  };
  http::RetryPolicy once = http_->options().retry;
  once.max_attempts = 1;
  Response resp = PLUMB_TRY(http_->request(req, once));
  if (resp.status != 200) {
    if (error_body != nullptr) *error_body = std::move(pending);
    return resp.status;
  }
  if (!stopped && pending.size() > kMaxLine)
    return fail(cni_code::kDecode,
                "GET " + req.url + ": a line of the answer is over " + std::to_string(kMaxLine) + " bytes");
  return resp.status;
}

Error Client::http_error(std::string_view what, std::string_view method, const std::string& path,
                         const Response& resp) const {
  std::string message;
  if (auto d = json::parse(resp.body, "API server answer"); d && d->IsObject()) {
    if (auto m = json::get_string(*d, "message", "Status"); m && *m) message = **m;
  }
  if (message.empty()) message = resp.body.substr(0, 200);
  unsigned code = cni_code::kIo;
  if (resp.status == 401 || resp.status == 403) code = cni_code::kInvalidConfig;
  if (resp.status == 404) code = cni_code::kNotFound;
  if (resp.status == 409) code = cni_code::kConflict;
  if (http::transient_status(resp.status)) code = cni_code::kTryAgainLater;
  std::string status = "HTTP " + std::to_string(resp.status);
  if (auto p = http::reason_phrase(resp.status); !p.empty()) status += " " + std::string(p);
  std::string msg = std::string(what) + ": " + std::string(method) + " " + creds_.server + path + ": " + status;
  if (resp.status == 401) msg += " (the API server rejected the credentials of " + creds_.origin + ")";
  if (resp.status == 403) msg += " (" + creds_.origin + " is not authorised)";
  return Error{code, 0, msg, message};
}

Result<std::optional<json::Document>> Client::get(const std::string& path, const std::string& what) {
  Response resp = PLUMB_TRY(request("GET", path));
  if (resp.status == 404) return std::optional<json::Document>{};
  if (resp.status != 200) return std::unexpected(http_error(what, "GET", path, resp));
  return std::optional<json::Document>(PLUMB_TRY(object_of(resp, what + ": the answer")));
}

Result<std::vector<json::Document>> Client::list(const std::string& path, const std::string& what) {
  auto l = PLUMB_TRY(list_versioned(path, what));
  return std::move(l.items);
}

Result<Client::List> Client::list_versioned(const std::string& path, const std::string& what) {
  List out;
  std::vector<json::Document>& items = out.items;
  std::string cont;
  const char sep = path.find('?') == std::string::npos ? '?' : '&';
  do {
    std::string page = path + sep + "limit=500" + (cont.empty() ? std::string() : "&continue=" + query_escape(cont));
    Response resp = PLUMB_TRY(request("GET", page));
    if (resp.status != 200) return std::unexpected(http_error(what, "GET", page, resp));
    json::Document d = PLUMB_TRY(object_of(resp, what + ": the answer"));
    const json::Value* arr = json::find(d, "items");
    if (arr == nullptr || !arr->IsArray()) return fail(cni_code::kDecode, what + ": the answer has no items list");
    for (const auto& item : arr->GetArray()) items.push_back(json::clone(item));
    cont = meta_string(d, "continue");
    out.resource_version = meta_string(d, "resourceVersion");
  } while (!cont.empty());
  return out;
}

std::string query_escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

Result<json::Document> object_of(const Response& resp, const std::string& what) {
  auto d = json::parse(resp.body, what);
  if (!d) return std::unexpected(d.error());
  if (!d->IsObject()) return fail(cni_code::kDecode, what + " is not a JSON object");
  return std::move(*d);
}

std::string meta_string(const json::Value& obj, std::string_view key) {
  const json::Value* meta = json::find(obj, "metadata");
  const json::Value* v = meta != nullptr && meta->IsObject() ? json::find(*meta, key) : nullptr;
  return v != nullptr && v->IsString() ? std::string(v->GetString()) : std::string();
}

std::string status_reason(const Response& resp) {
  auto d = json::parse(resp.body, "API server answer");
  if (!d || !d->IsObject()) return {};
  const json::Value* kind = json::find(*d, "kind");
  const json::Value* reason = json::find(*d, "reason");
  if (kind == nullptr || !kind->IsString() || std::string_view(kind->GetString()) != "Status") return {};
  return reason != nullptr && reason->IsString() ? reason->GetString() : std::string();
}

}  // namespace plumb::k8s
