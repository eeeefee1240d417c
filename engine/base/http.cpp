// The HTTP client (see http.hpp) on libcurl's easy interface.
#include "engine/base/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#if PLUMB_STATIC_BINARY
// libcrypto's x86_64 code calls OPENSSL_cpuid_setup from the .init section: its CPUID
// instructions (each a VM exit in a virtual machine) would run at every start of plumb, although
// few invocations make an HTTP request. plumb links with --wrap=OPENSSL_cpuid_setup
// (CMakeLists.txt), so that call does nothing and the real setup runs before libcurl's first use
// of OpenSSL (global_init).
extern "C" void __real_OPENSSL_cpuid_setup();     // NOLINT(bugprone-reserved-identifier)
extern "C" void __wrap_OPENSSL_cpuid_setup() {}   // NOLINT(bugprone-reserved-identifier)
#endif

namespace plumb::http {
namespace {

using Clock = std::chrono::steady_clock;

/// curl_global_init once per process, on the first handle (this is what loads libcurl in the
/// dynamic build; in the static one, OpenSSL's CPU detection runs here, see below).
CURLcode global_init() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] {
#if PLUMB_STATIC_BINARY
    __real_OPENSSL_cpuid_setup();
#endif
    rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  });
  return rc;
}

bool transient_curl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool tls_config_error(CURLcode c) {
  switch (c) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
      return true;
    default:
      return false;
  }
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

/// Where the write callback hands a streamed body: the handle (for the status) and the reader.
struct StreamSink {
  CURL* handle;
  const std::function<bool(long, std::string_view)>* reader;
};

/// The body handed to Request::on_body as it arrives; 0 (curl ends the transfer) when it says stop.
size_t on_stream(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<StreamSink*>(user);
  long status = 0;
  curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
  return (*sink->reader)(status, std::string_view(data, size * n)) ? size * n : 0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

/// Where the header callback puts the wanted response headers.
struct HeaderSink {
  const std::vector<std::string>* want;  // lower-case names
  std::map<std::string, std::string>* got;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<HeaderSink*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    sink->got->clear();  // a new response (after a 100 Continue, say): only its headers count
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string name = lower(line.substr(0, colon));
  if (std::find(sink->want->begin(), sink->want->end(), name) == sink->want->end()) return size * n;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  (*sink->got)[name] = std::string(value);
  return size * n;
}

/// One PEM of the TLS settings: as data (copied into the handle) when given, else as a file;
/// nothing when neither is. `type_opt` (CURLOPT_SSLCERTTYPE/SSLKEYTYPE) is set to "PEM".
void set_pem(CURL* h, const std::string& pem, const std::string& file, CURLoption blob_opt, CURLoption file_opt,
             std::optional<CURLoption> type_opt) {
  if (pem.empty() && file.empty()) return;
  if (!pem.empty()) {
    curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, blob_opt, &blob);
  } else {
    curl_easy_setopt(h, file_opt, file.c_str());
  }
  if (type_opt) curl_easy_setopt(h, *type_opt, "PEM");
}

/// Certificate authority (or no verification at all), client certificate and key.
void set_tls(CURL* h, const Tls& tls) {
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    set_pem(h, tls.ca_pem, tls.ca_file, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, std::nullopt);
  }
  set_pem(h, tls.cert_pem, tls.cert_file, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, CURLOPT_SSLCERTTYPE);
  set_pem(h, tls.key_pem, tls.key_file, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, CURLOPT_SSLKEYTYPE);
}

/// Method and body. GET and HEAD send no body; every other method sends `req.body` (maybe empty).
void set_method(CURL* h, const Request& req) {
  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else {
    if (req.method != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  }
}

/// The error of a failed transfer, classified as http.hpp describes.
Error transport_error(CURLcode rc, const std::string& what, const std::string& peer, const char* errbuf) {
  std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  if (tls_config_error(rc)) return Error{cni_code::kInvalidConfig, 0, what + ": TLS with " + peer + " failed", detail};
  unsigned code = transient_curl(rc) ? cni_code::kTryAgainLater : cni_code::kIo;
  // A timeout keeps ETIMEDOUT, so callers can tell "no answer in time" from curl's own clock.
  return Error{code, rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : 0, what + ": " + peer + " cannot be reached", detail};
}

}  // namespace

bool transient_status(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::string_view reason_phrase(long status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return {};
  }
}

RetryStats retry(const RetryPolicy& policy, const std::function<Verdict()>& attempt) {
  const auto start = Clock::now();
  const auto deadline = policy.budget.count() > 0 ? start + policy.budget : Clock::time_point::max();
  auto wait = policy.backoff;
  RetryStats stats;
  for (;;) {
    ++stats.attempts;
    Verdict v = attempt();
    if (v == Verdict::Done) break;
    if (stats.attempts >= policy.max_attempts || Clock::now() >= deadline) {
      stats.exhausted = true;
      break;
    }
    if (v == Verdict::Retry) {
      std::this_thread::sleep_for(std::min<Clock::duration>(wait, deadline - Clock::now()));
      wait = std::min(wait * 2, policy.backoff_max);
      if (Clock::now() >= deadline) {
        stats.exhausted = true;
        break;
      }
    }
  }
  stats.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return stats;
}

Client::Client(Options opts) : opts_(std::move(opts)) {}

Client::~Client() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Client::Client(Client&& o) noexcept
    : opts_(std::move(o.opts_)), curl_(std::exchange(o.curl_, nullptr)), attempts_(o.attempts_) {}

Client& Client::operator=(Client&& o) noexcept {
  if (this != &o) {
    if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
    opts_ = std::move(o.opts_);
    curl_ = std::exchange(o.curl_, nullptr);
    attempts_ = o.attempts_;
  }
  return *this;
}

namespace {
RequestObserver g_observer = nullptr;
}  // namespace

void set_request_observer(RequestObserver fn) { g_observer = fn; }

Result<Response> Client::send(const Request& req) {
  if (g_observer == nullptr || opts_.observed_as == nullptr) return attempt(req);
  const auto began = std::chrono::steady_clock::now();
  auto r = attempt(req);
  g_observer(
      Observed{opts_.observed_as, req.method, req.url, r ? r->status : 0, std::chrono::steady_clock::now() - began});
  return r;
}

Result<Response> Client::attempt(const Request& req) {
  ++attempts_;
  const std::string what = req.method + " " + req.url;
  for (const auto& line : req.headers) {
    if (line.find_first_of("\r\n") != std::string::npos) {
      return fail(cni_code::kInvalidConfig,
                  what + ": header " + line.substr(0, line.find(':')) + " contains a line break");
    }
  }
  if (curl_ == nullptr) {
    if (CURLcode rc = global_init(); rc != CURLE_OK)
      return fail(cni_code::kInternal, what + ": libcurl cannot be initialised", curl_easy_strerror(rc));
    curl_ = curl_easy_init();
    if (curl_ == nullptr)
      return fail(cni_code::kInternal, what + ": libcurl could not create a handle",
                  curl_easy_strerror(CURLE_FAILED_INIT));
  }
  CURL* h = static_cast<CURL*>(curl_);
  curl_easy_reset(h);  // keeps the connection cache: the next request reuses an open connection
  char errbuf[CURL_ERROR_SIZE] = {0};
  Response resp;
  std::vector<std::string> want;
  want.reserve(req.want_headers.size());
  for (const auto& w : req.want_headers) want.push_back(lower(w));
  HeaderSink sink{&want, &resp.headers};
  const auto connect = opts_.connect_timeout.count() > 0 ? opts_.connect_timeout : opts_.timeout;
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(opts_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect.count()));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "plumb");
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  StreamSink stream{h, &req.on_body};
  if (req.on_body) {
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &stream);
  } else {
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp.body);
  }
  if (!opts_.unix_socket.empty()) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, opts_.unix_socket.c_str());
  if (opts_.http2_prior_knowledge) {
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    // libcurl before 8.0 breaks a reused prior-knowledge connection ("Error in the HTTP2 framing
    // layer", curl/curl #10634, fixed by #10643; Debian 12 has 7.88): one connection per request.
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  }
  // Trailers (HTTP/2, e.g. grpc-status) reach the header callback after the body, like headers.
  if (!want.empty()) {
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
  }
  set_tls(h, opts_.tls);
  set_method(h, req);
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");  // no 100-continue round trip
  std::string ctype = "Content-Type: " + req.content_type;
  if (!req.content_type.empty()) headers = curl_slist_append(headers, ctype.c_str());
  for (const auto& line : req.headers) headers = curl_slist_append(headers, line.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = curl_easy_perform(h);
  // Tokens and buffers of this request must not linger in the handle.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_slist_free_all(headers);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
  if (rc == CURLE_WRITE_ERROR && req.on_body && resp.status != 0) return resp;  // the reader ended it
  if (rc != CURLE_OK) return std::unexpected(transport_error(rc, what, opts_.peer, errbuf));
  return resp;
}

Result<Response> Client::request(const Request& req) { return request(req, opts_.retry); }

Result<Response> Client::request(const Request& req, const RetryPolicy& policy) {
  std::optional<Result<Response>> last;
  RetryStats stats = retry(policy, [&] {
    last = send(req);
    bool transient = *last ? transient_status((*last)->status) : last->error().cni_code == cni_code::kTryAgainLater;
    return transient ? Verdict::Retry : Verdict::Done;
  });
  if (!*last && stats.exhausted && policy.max_attempts > 1) {
    last->error().msg += " (" + std::to_string(stats.attempts) + " attempts, " + std::to_string(opts_.timeout.count()) +
                         " ms timeout each)";
  }
  return std::move(*last);
}

}  // namespace plumb::http
