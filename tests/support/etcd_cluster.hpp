// Real etcd members for the cluster IPAM tests and bench: Debian's /usr/bin/etcd started on
// 127.0.0.1 ports chosen by the caller (never 2379) with data in a temporary directory, in the
// caller's network namespace (tests run in a private one), and stopped by process id. Members
// die with the process that started them (PR_SET_PDEATHSIG), so a crashed test leaves none.
// Self-contained (no doctest), so the bench can link it too.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace plumb::test {

/// PEM files for a TLS etcd, made with the openssl command: a CA, a server certificate for
/// 127.0.0.1 and two client certificates, all signed by the CA: one with a CommonName, one
/// without (etcd's JSON gateway refuses client certificates with a CN once auth is on).
struct EtcdTls {
  std::string ca, server_cert, server_key, client_cert, client_key, anon_cert, anon_key;
};

/// Creates EtcdTls files under `dir`. nullopt when openssl fails.
[[nodiscard]] std::optional<EtcdTls> make_etcd_tls(const std::string& dir);

class EtcdCluster {
 public:
  /// Starts `members` members; member i listens for clients on base_port + 2i and for peers on
  /// base_port + 2i + 1. With tls, clients must present a certificate signed by tls->ca.
  /// Waits until every member reports healthy; ok() tells whether that happened.
  EtcdCluster(int members, int base_port, const EtcdTls* tls = nullptr);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  /// All members started and healthy within the start timeout.
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] int size() const { return static_cast<int>(pids_.size()); }
  /// "http://127.0.0.1:<port>" (https with TLS) of member i.
  [[nodiscard]] std::string client_url(int i) const;
  [[nodiscard]] std::vector<std::string> client_urls() const;
  /// The client URLs as a JSON array text, for "etcd_endpoints".
  [[nodiscard]] std::string endpoints_json() const;
  /// Data directory root (member i uses <dir>/m<i>).
  [[nodiscard]] const std::string& dir() const { return dir_; }
  /// Process id of member i, 0 when it is not running.
  [[nodiscard]] pid_t pid(int i) const { return pids_[static_cast<size_t>(i)]; }

  /// SIGKILLs member i and reaps it.
  void kill(int i);
  /// Starts member i again on its data directory; true once it is healthy.
  bool restart(int i);
  /// True once member i answers /health with "true" within timeout_ms.
  bool wait_healthy(int i, int timeout_ms);
  /// Index of the current leader (asked through /v3/maintenance/status), -1 if none answers.
  [[nodiscard]] int leader() const;
  /// Creates user `user` (password `password`) with read/write on /plumb/, a root user, and
  /// turns authentication on (through etcdctl). False when a step fails.
  bool enable_auth(const std::string& user, const std::string& password);
  /// Log of member i (its stderr), for failure messages.
  [[nodiscard]] std::string log(int i) const;

 private:
  void spawn(int i, bool fresh);

  int base_port_;
  const EtcdTls* tls_;
  std::string dir_;
  std::vector<pid_t> pids_;
  bool ok_ = false;
};

}  // namespace plumb::test
