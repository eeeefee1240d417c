// etcd v3 JSON-gateway client (see etcd_client.hpp). Wire format, as etcd 3.4's grpc-gateway
// speaks it: request bodies use the proto field names (snake_case), bytes fields are base64,
// int64 fields are JSON strings, enum values are their names ("EQUAL", "CREATE"); answers omit
// fields holding their default (false, 0, empty list). Errors come back as
// {"error": text, "code": gRPC code, "message": text} with an HTTP status mapped from the code.
#include "ipam/etcd_client.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "engine/base/base64.hpp"
#include "engine/base/http.hpp"
#include "engine/base/json.hpp"

namespace plumb::ipam::etcd {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// gRPC status codes etcd answers with (google.golang.org/grpc/codes).
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcPermissionDenied = 7;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;

void write_str(Writer& w, std::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

void write_b64(Writer& w, const char* name, std::string_view data) {
  w.Key(name);
  write_str(w, base64::encode(data));
}

void write_i64(Writer& w, const char* name, int64_t v) {
  w.Key(name);
  write_str(w, std::to_string(v));
}

/// An int64 field as the gateway sends it (a string), or a plain number; absent = 0.
int64_t get_i64(const json::Value& obj, const char* key) {
  const json::Value* v = json::find(obj, key);
  if (v == nullptr) return 0;
  if (v->IsString()) return std::strtoll(v->GetString(), nullptr, 10);
  if (v->IsInt64()) return v->GetInt64();
  return 0;
}

bool get_bool(const json::Value& obj, const char* key) {
  const json::Value* v = json::find(obj, key);
  return v != nullptr && v->IsBool() && v->GetBool();
}

std::string get_text(const json::Value& obj, const char* key) {
  const json::Value* v = json::find(obj, key);
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

void write_range(Writer& w, const std::string& key, const std::string& range_end, bool keys_only, int64_t limit) {
  w.StartObject();
  write_b64(w, "key", key);
  if (!range_end.empty()) write_b64(w, "range_end", range_end);
  if (keys_only) {
    w.Key("keys_only");
    w.Bool(true);
  }
  if (limit > 0) write_i64(w, "limit", limit);
  w.EndObject();
}

void write_op(Writer& w, const TxnOp& op) {
  w.StartObject();
  switch (op.kind) {
    case TxnOp::Kind::Range:
      w.Key("request_range");
      write_range(w, op.key, op.range_end, op.keys_only, op.limit);
      break;
    case TxnOp::Kind::Put:
      w.Key("request_put");
      w.StartObject();
      write_b64(w, "key", op.key);
      write_b64(w, "value", op.value);
      w.EndObject();
      break;
    case TxnOp::Kind::Delete:
      w.Key("request_delete_range");
      w.StartObject();
      write_b64(w, "key", op.key);
      if (!op.range_end.empty()) write_b64(w, "range_end", op.range_end);
      w.EndObject();
      break;
  }
  w.EndObject();
}

const char* target_name(Compare::Target t) {
  switch (t) {
    case Compare::Target::Create: return "CREATE";
    case Compare::Target::Mod: return "MOD";
    case Compare::Target::Version: return "VERSION";
    case Compare::Target::Value: return "VALUE";
  }
  return "CREATE";
}

const char* op_name(Compare::Op o) {
  switch (o) {
    case Compare::Op::Equal: return "EQUAL";
    case Compare::Op::Greater: return "GREATER";
    case Compare::Op::Less: return "LESS";
    case Compare::Op::NotEqual: return "NOT_EQUAL";
  }
  return "EQUAL";
}

void write_compare(Writer& w, const Compare& c) {
  w.StartObject();
  w.Key("result");
  w.String(op_name(c.op));
  w.Key("target");
  w.String(target_name(c.target));
  write_b64(w, "key", c.key);
  switch (c.target) {
    case Compare::Target::Create: write_i64(w, "create_revision", c.revision); break;
    case Compare::Target::Mod: write_i64(w, "mod_revision", c.revision); break;
    case Compare::Target::Version: write_i64(w, "version", c.revision); break;
    case Compare::Target::Value: write_b64(w, "value", c.value); break;
  }
  w.EndObject();
}

Result<RangeResult> decode_range(const json::Value& v) {
  RangeResult r;
  if (!v.IsObject()) return fail(cni_code::kDecode, "etcd range answer is not an object: " + json::quote(v));
  if (const json::Value* h = json::find(v, "header"); h != nullptr && h->IsObject()) r.revision = get_i64(*h, "revision");
  r.more = get_bool(v, "more");
  r.count = get_i64(v, "count");
  if (const json::Value* kvs = json::find(v, "kvs"); kvs != nullptr && kvs->IsArray()) {
    for (const auto& e : kvs->GetArray()) {
      KeyValue kv;
      kv.key = PLUMB_TRY(base64::decode(get_text(e, "key"), "etcd key"));
      kv.value = PLUMB_TRY(base64::decode(get_text(e, "value"), "etcd value of " + kv.key));
      kv.create_revision = get_i64(e, "create_revision");
      kv.mod_revision = get_i64(e, "mod_revision");
      kv.version = get_i64(e, "version");
      r.kvs.push_back(std::move(kv));
    }
  }
  return r;
}

/// Scheme-qualified endpoint: "host:port" becomes http:// (https:// with a CA file).
std::string normalise_endpoint(std::string ep, bool tls) {
  while (!ep.empty() && ep.back() == '/') ep.pop_back();
  if (ep.find("://") == std::string::npos) ep = (tls ? "https://" : "http://") + ep;
  return ep;
}

/// The HTTP client options: TLS, per-request and connection timeouts, and the retry policy of
/// an operation (a doubling back-off from 50 ms to 1 s between passes over the endpoints).
http::Options http_options(const Options& o) {
  http::Options h;
  h.tls.ca_file = o.ca_file;
  h.tls.cert_file = o.cert_file;
  h.tls.key_file = o.key_file;
  h.timeout = std::chrono::milliseconds(o.request_timeout_ms);
  h.connect_timeout = std::chrono::milliseconds(o.connect_timeout_ms);
  h.retry.max_attempts = o.max_attempts;
  h.retry.backoff = std::chrono::milliseconds(50);
  h.retry.backoff_max = std::chrono::milliseconds(1000);
  h.retry.budget = std::chrono::milliseconds(o.retry_timeout_ms);
  h.peer = "etcd";
  h.observed_as = "etcd";
  return h;
}

}  // namespace

TxnOp TxnOp::range(std::string key, std::string range_end, bool keys_only, int64_t limit) {
  TxnOp op;
  op.kind = Kind::Range;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  op.keys_only = keys_only;
  op.limit = limit;
  return op;
}

TxnOp TxnOp::put(std::string key, std::string value) {
  TxnOp op;
  op.kind = Kind::Put;
  op.key = std::move(key);
  op.value = std::move(value);
  return op;
}

TxnOp TxnOp::del(std::string key, std::string range_end) {
  TxnOp op;
  op.kind = Kind::Delete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) < 0xff) {
      c = static_cast<char>(static_cast<unsigned char>(c) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

struct Client::Impl {
  explicit Impl(Options o) : opts(std::move(o)), http(http_options(opts)) {}

  Options opts;
  http::Client http;   // one connection cache for every endpoint
  size_t current = 0;  // endpoint that answered last
  std::string token;   // auth token ("" until authenticated)

  /// One POST of a JSON body to `endpoint` + `path`, no retry (see http::Client::send).
  Result<http::Response> post(const std::string& endpoint, std::string_view path, const std::string& body,
                              bool with_token) {
    http::Request req;
    req.method = "POST";
    req.url = endpoint + std::string(path);
    req.body = body;
    req.content_type = "application/json";
    if (with_token && !token.empty()) req.headers.push_back("Authorization: " + token);
    return http.send(req);
  }

  std::string endpoints_str() const {
    std::string out;
    for (auto& e : opts.endpoints) out += (out.empty() ? "" : ", ") + e;
    return out;
  }

  /// What failed: the attempt may be repeated elsewhere (retry), or it is final (error).
  struct Attempt {
    bool retry = false;
    std::string why;      // for retry
    std::string message;  // etcd's own text of a non-200 answer
    std::optional<Error> error;
  };

  /// The error of a non-200 answer.
  static void classify(const http::Response& r, const std::string& endpoint, std::string_view path, Attempt& a, int& grpc_code) {
    std::string message = r.body;
    grpc_code = -1;
    auto doc = json::parse(r.body, "etcd error");
    if (doc && doc->IsObject()) {
      grpc_code = static_cast<int>(get_i64(*doc, "code"));
      std::string m = get_text(*doc, "message");
      if (m.empty()) m = get_text(*doc, "error");
      if (!m.empty()) message = m;
    }
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
    a.message = message;
    std::string where = "etcd " + std::string(path) + " at " + endpoint + " (HTTP " + std::to_string(r.status) + ")";
    if (grpc_code == kGrpcUnavailable || grpc_code == kGrpcDeadlineExceeded || grpc_code == kGrpcResourceExhausted ||
        (grpc_code < 0 && r.status >= 500)) {
      a.retry = true;
      a.why = where + ": " + message;
      return;
    }
    if (message.find("CommonName") != std::string::npos) {
      a.error = Error{cni_code::kInvalidConfig, 0,
                      where + ": " + message +
                          " (with authentication on, etcd's JSON gateway refuses client certificates that carry a "
                          "CommonName: use a certificate without one, plus etcd_username/etcd_password)",
                      {}};
      return;
    }
    bool auth = grpc_code == kGrpcUnauthenticated || grpc_code == kGrpcPermissionDenied || r.status == 401 ||
                r.status == 403 || message.find("user name") != std::string::npos ||
                message.find("authentication") != std::string::npos || message.find("auth token") != std::string::npos;
    if (auth) {
      a.error = Error{cni_code::kInvalidConfig, 0,
                      "etcd authentication failed: " + where + ": " + message + " (check etcd_username/etcd_password)", {}};
      return;
    }
    a.error = Error{cni_code::kIo, 0, where + ": " + message, {}};
  }

  /// A request that got no answer: another endpoint may answer (retry), unless libcurl itself
  /// is missing (error).
  static void transport_failure(const Error& e, const std::string& endpoint, Attempt& a) {
    if (e.cni_code == cni_code::kInternal) {
      a.error = e;
      return;
    }
    a.retry = true;
    a.why = endpoint + ": " + e.details;
  }

  /// Obtains a token from `endpoint` when a user is configured and none is held.
  Attempt authenticate(const std::string& endpoint) {
    Attempt a;
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("name");
    write_str(w, opts.username);
    w.Key("password");
    write_str(w, opts.password);
    w.EndObject();
    auto r = post(endpoint, "/v3/auth/authenticate", std::string(sb.GetString(), sb.GetSize()), false);
    if (!r) {
      transport_failure(r.error(), endpoint, a);
      return a;
    }
    if (r->status != 200) {
      int code = 0;
      classify(*r, endpoint, "/v3/auth/authenticate", a, code);
      if (a.error && code == kGrpcInvalidArgument) {
        a.error = Error{cni_code::kInvalidConfig, 0,
                        "etcd authentication failed for user \"" + opts.username + "\" at " + endpoint + ": " + a.message +
                            " (check etcd_username/etcd_password)",
                        {}};
      }
      return a;
    }
    auto doc = json::parse(r->body, "etcd authenticate answer from " + endpoint);
    if (!doc) {
      a.error = doc.error();
      return a;
    }
    token = get_text(*doc, "token");
    if (token.empty()) {
      a.error = Error{cni_code::kIo, 0, "etcd authenticate at " + endpoint + " returned no token: " + r->body, {}};
    }
    return a;
  }

  /// One request with failover and bounded retry (see the header): a failed endpoint passes
  /// the request on to the next one at once, a pass over all of them ends with the back-off.
  Result<json::Document> call(std::string_view path, const std::string& body) {
    std::optional<Result<json::Document>> result;
    std::string last;
    bool reauthenticated = false;
    size_t tried = 0;  // endpoints failed in this pass
    auto failover = [&](std::string why) {
      last = std::move(why);
      current = (current + 1) % opts.endpoints.size();
      if (++tried < opts.endpoints.size()) return http::Verdict::RetryNow;
      tried = 0;
      return http::Verdict::Retry;
    };
    auto finish = [&](Result<json::Document> r) {
      result = std::move(r);
      return http::Verdict::Done;
    };
    http::RetryStats stats = http::retry(http.options().retry, [&] {
      const std::string ep = opts.endpoints[current];
      Attempt a;
      if (!opts.username.empty() && token.empty()) {
        a = authenticate(ep);
        if (a.error) return finish(std::unexpected(*a.error));
        return a.retry ? failover(a.why) : http::Verdict::RetryNow;  // authenticated: now the request
      }
      auto r = post(ep, path, body, true);
      if (!r) {
        transport_failure(r.error(), ep, a);
      } else if (r->status == 200) {
        return finish(json::parse(r->body, "etcd " + std::string(path) + " answer from " + ep));
      } else {
        int code = 0;
        classify(*r, ep, path, a, code);
        if (a.error && !opts.username.empty() && !reauthenticated &&
            (code == kGrpcUnauthenticated || a.error->msg.find("auth token") != std::string::npos)) {
          token.clear();  // expired or issued by a member that forgot it: authenticate again
          reauthenticated = true;
          return http::Verdict::RetryNow;
        }
      }
      if (a.error) return finish(std::unexpected(*a.error));
      return failover(a.why);
    });
    if (result) return std::move(*result);
    return fail(cni_code::kTryAgainLater, "etcd unreachable at " + endpoints_str() + " (" +
                                              std::to_string(stats.attempts) + " attempts in " +
                                              std::to_string(stats.elapsed.count()) + " ms; last: " + last + ")");
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::make(Options opts) {
  if (opts.endpoints.empty()) return fail(cni_code::kInvalidConfig, "no etcd endpoint configured (etcd_host or etcd_endpoints)");
  const bool tls = !opts.ca_file.empty() || !opts.cert_file.empty();
  for (auto& ep : opts.endpoints) {
    ep = normalise_endpoint(ep, tls);
    if (ep.rfind("http://", 0) != 0 && ep.rfind("https://", 0) != 0) {
      return fail(cni_code::kInvalidConfig, "etcd endpoint \"" + ep + "\" is not an http:// or https:// URL");
    }
  }
  if (opts.cert_file.empty() != opts.key_file.empty()) {
    return fail(cni_code::kInvalidConfig, "etcd_cert_file and etcd_key_file must be given together");
  }
  if (opts.username.empty() && !opts.password.empty()) {
    return fail(cni_code::kInvalidConfig, "etcd_password is set without etcd_username");
  }
  if (opts.max_attempts < 1) opts.max_attempts = 1;
  return Client(std::make_unique<Impl>(std::move(opts)));
}

std::string Client::endpoints_str() const { return impl_->endpoints_str(); }
uint64_t Client::requests() const { return impl_->http.attempts(); }

Result<RangeResult> Client::range(const std::string& key, const std::string& range_end, bool keys_only, int64_t limit) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  write_range(w, key, range_end, keys_only, limit);
  auto doc = PLUMB_TRY(impl_->call("/v3/kv/range", std::string(sb.GetString(), sb.GetSize())));
  return decode_range(doc);
}

Status Client::put(const std::string& key, const std::string& value) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  write_b64(w, "key", key);
  write_b64(w, "value", value);
  w.EndObject();
  PLUMB_TRY(impl_->call("/v3/kv/put", std::string(sb.GetString(), sb.GetSize())));
  return {};
}

Result<int64_t> Client::del(const std::string& key, const std::string& range_end) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  write_b64(w, "key", key);
  if (!range_end.empty()) write_b64(w, "range_end", range_end);
  w.EndObject();
  auto doc = PLUMB_TRY(impl_->call("/v3/kv/deleterange", std::string(sb.GetString(), sb.GetSize())));
  return get_i64(doc, "deleted");
}

Result<TxnResult> Client::txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                              const std::vector<TxnOp>& failure) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("compare");
  w.StartArray();
  for (auto& c : compares) write_compare(w, c);
  w.EndArray();
  w.Key("success");
  w.StartArray();
  for (auto& op : success) write_op(w, op);
  w.EndArray();
  w.Key("failure");
  w.StartArray();
  for (auto& op : failure) write_op(w, op);
  w.EndArray();
  w.EndObject();
  auto doc = PLUMB_TRY(impl_->call("/v3/kv/txn", std::string(sb.GetString(), sb.GetSize())));
  TxnResult r;
  r.succeeded = get_bool(doc, "succeeded");
  if (const json::Value* h = json::find(doc, "header"); h != nullptr && h->IsObject()) r.revision = get_i64(*h, "revision");
  const std::vector<TxnOp>& ran = r.succeeded ? success : failure;
  const json::Value* responses = json::find(doc, "responses");
  size_t count = responses != nullptr && responses->IsArray() ? responses->Size() : 0;
  if (count != ran.size()) {
    return fail(cni_code::kDecode, "etcd txn answered " + std::to_string(count) + " responses for " +
                                       std::to_string(ran.size()) + " operations: " + json::quote(doc));
  }
  for (size_t i = 0; i < count; ++i) {
    const json::Value& resp = (*responses)[static_cast<rapidjson::SizeType>(i)];
    RangeResult rr;
    int64_t deleted = 0;
    if (ran[i].kind == TxnOp::Kind::Range) {
      const json::Value* v = json::find(resp, "response_range");
      if (v != nullptr) rr = PLUMB_TRY(decode_range(*v));
    } else if (ran[i].kind == TxnOp::Kind::Delete) {
      const json::Value* v = json::find(resp, "response_delete_range");
      if (v != nullptr) deleted = get_i64(*v, "deleted");
    }
    r.ranges.push_back(std::move(rr));
    r.deleted.push_back(deleted);
  }
  return r;
}

}  // namespace plumb::ipam::etcd
