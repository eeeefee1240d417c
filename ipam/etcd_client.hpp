// A small etcd v3 client over etcd's JSON gateway (grpc-gateway, served on every client URL):
// POST /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn and /v3/auth/authenticate, with
// keys and values base64-encoded (engine/base/base64) and JSON through RapidJSON. Transport is
// engine/base/http: one HTTP client per etcd client (keep-alive), TLS with a CA and a client
// certificate/key, username/password authentication turned into a token sent in the
// "Authorization" header (re-authenticated once when etcd says the token expired).
//
// Failover and bounded retry: a request goes to the endpoint that answered last; a transport
// failure (refused, timeout, TLS) or an etcd "unavailable" answer (no leader, request timed out,
// HTTP 5xx) moves it to the next endpoint, with a doubling back-off between full passes, until
// `retry_timeout_ms` has passed or `max_attempts` requests were made. Then the error is
// kTryAgainLater naming every endpoint and the last failure. A request retried after a timeout
// may have been applied already: callers make their writes safe to repeat (cluster.cpp claims
// an owner key in the same transaction and reads it back on failure).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::ipam::etcd {

/// How to reach etcd. Endpoints are URLs ("http://127.0.0.1:2379", "https://etcd-0:2379"); a
/// bare "host:port" means http:// (https:// when a CA file is given), as whereabouts' etcd_host.
struct Options {
  std::vector<std::string> endpoints;
  std::string ca_file;     // PEM CA bundle to verify the server ("" = system default)
  std::string cert_file;   // PEM client certificate for mutual TLS ("" = none)
  std::string key_file;    // PEM key of cert_file
  std::string username;    // etcd user; "" = no authentication
  std::string password;
  long connect_timeout_ms = 1000;  // per connection attempt
  long request_timeout_ms = 5000;  // per HTTP request, connection included
  long retry_timeout_ms = 10000;   // total budget for one operation across endpoints and retries (0 = none)
  int max_attempts = 24;           // total HTTP requests for one operation
};

/// One key-value pair as etcd returns it (key/value decoded).
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
};

/// The answer to a range request.
struct RangeResult {
  std::vector<KeyValue> kvs;
  bool more = false;     // limit cut the answer short
  int64_t count = 0;     // number of keys in the range (not limited)
  int64_t revision = 0;  // store revision of the answer
};

/// One comparison of a transaction: `target` of `key` compared with `op` to revision or value.
struct Compare {
  enum class Target { Create, Mod, Version, Value };
  enum class Op { Equal, Greater, Less, NotEqual };
  std::string key;
  Target target = Target::Create;
  Op op = Op::Equal;
  int64_t revision = 0;  // create_revision / mod_revision / version, for those targets
  std::string value;     // for Target::Value
};

/// One operation of a transaction branch.
struct TxnOp {
  enum class Kind { Range, Put, Delete };
  Kind kind = Kind::Range;
  std::string key;
  std::string range_end;  // "" = the single key; see prefix_end()
  std::string value;      // Put only
  bool keys_only = false; // Range only
  int64_t limit = 0;      // Range only, 0 = no limit

  [[nodiscard]] static TxnOp range(std::string key, std::string range_end = {}, bool keys_only = false, int64_t limit = 0);
  [[nodiscard]] static TxnOp put(std::string key, std::string value);
  [[nodiscard]] static TxnOp del(std::string key, std::string range_end = {});
};

/// The answer to a transaction: which branch ran, and per operation of that branch its range
/// result (empty for puts and deletes) and, for deletes, how many keys went.
struct TxnResult {
  bool succeeded = false;
  std::vector<RangeResult> ranges;
  std::vector<int64_t> deleted;
  int64_t revision = 0;
};

/// The smallest key after every key starting with `prefix` (etcd's range_end for a prefix).
[[nodiscard]] std::string prefix_end(std::string prefix);

/// A client of one etcd cluster. Not thread-safe: one per thread or process.
class Client {
 public:
  /// Validates the options (at least one endpoint, URL schemes http/https, key file when a cert
  /// is given). Makes no request: the first call connects. Errors: kInvalidConfig naming the value.
  [[nodiscard]] static Result<Client> make(Options opts);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  /// Keys in [key, range_end) (range_end "" = just `key`), optionally only keys, at most
  /// `limit` of them (0 = all), linearizable.
  [[nodiscard]] Result<RangeResult> range(const std::string& key, const std::string& range_end = {},
                                          bool keys_only = false, int64_t limit = 0);
  /// Sets key = value.
  [[nodiscard]] Status put(const std::string& key, const std::string& value);
  /// Deletes [key, range_end); returns how many keys went.
  [[nodiscard]] Result<int64_t> del(const std::string& key, const std::string& range_end = {});
  /// If every compare holds, runs `success`, else `failure`, atomically.
  [[nodiscard]] Result<TxnResult> txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                                      const std::vector<TxnOp>& failure);

  /// Endpoints joined with ", " (for messages).
  [[nodiscard]] std::string endpoints_str() const;
  /// HTTP requests made so far by this client (authentication included), for cost checks.
  [[nodiscard]] uint64_t requests() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace plumb::ipam::etcd
