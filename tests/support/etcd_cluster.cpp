#include "tests/support/etcd_cluster.hpp"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/base/http.hpp"

namespace plumb::test {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";
constexpr const char* kEtcdctl = "/usr/bin/etcdctl";
constexpr int kStartTimeoutMs = 20000;

/// One HTTP request to a member (GET when body is null), no retry; the body, or nullopt on any
/// failure or non-200 answer.
std::optional<std::string> ask(const std::string& url, const char* body, const EtcdTls* tls, long timeout_ms) {
  http::Options o;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  if (tls != nullptr) {
    o.tls.ca_file = tls->ca;
    o.tls.cert_file = tls->client_cert;
    o.tls.key_file = tls->client_key;
  }
  http::Request req;
  req.url = url;
  if (body != nullptr) {
    req.method = "POST";
    req.body = body;
    req.content_type = "application/x-www-form-urlencoded";  // what libcurl sent for POSTFIELDS
  }
  auto r = http::Client(o).send(req);
  if (!r || r->status != 200) return std::nullopt;
  return std::move(r->body);
}

std::string member_name(int i) { return "m" + std::to_string(i); }

std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::optional<EtcdTls> make_etcd_tls(const std::string& dir) {
  std::filesystem::create_directories(dir);
  EtcdTls t{dir + "/ca.crt",     dir + "/server.crt", dir + "/server.key", dir + "/client.crt",
            dir + "/client.key", dir + "/anon.crt",   dir + "/anon.key"};
  {
    std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n";
    std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  }
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string d = quote(dir);
  std::string cmd =
      "set -e; cd " + d + "; exec >openssl.log 2>&1; "
      "openssl req -x509 " + key + " -keyout ca.key -out ca.crt -subj /CN=plumb-test-ca -days 2; "
      "openssl req " + key + " -keyout server.key -out server.csr -subj /CN=127.0.0.1; "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext; "
      "openssl req " + key + " -keyout client.key -out client.csr -subj /CN=plumb-client; "
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 -extfile client.ext; "
      "openssl req " + key + " -keyout anon.key -out anon.csr -subj /O=plumb; "
      "openssl x509 -req -in anon.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out anon.crt -days 2 -extfile client.ext";
  if (std::system(cmd.c_str()) != 0) return std::nullopt;
  return t;
}

EtcdCluster::EtcdCluster(int members, int base_port, const EtcdTls* tls) : base_port_(base_port), tls_(tls) {
  const char* root = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";  // fsync is cheap on tmpfs
  std::string tmpl = std::string(root) + "/plumb-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return;
  dir_ = tmpl;
  pids_.assign(static_cast<size_t>(members), 0);
  for (int i = 0; i < members; ++i) spawn(i, true);
  ok_ = true;
  for (int i = 0; i < members && ok_; ++i) ok_ = wait_healthy(i, kStartTimeoutMs);
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) kill(i);
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string EtcdCluster::client_url(int i) const {
  return std::string(tls_ != nullptr ? "https" : "http") + "://127.0.0.1:" + std::to_string(base_port_ + 2 * i);
}

std::vector<std::string> EtcdCluster::client_urls() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(client_url(i));
  return out;
}

std::string EtcdCluster::endpoints_json() const {
  std::string out = "[";
  for (int i = 0; i < size(); ++i) out += (i ? ", \"" : "\"") + client_url(i) + "\"";
  return out + "]";
}

void EtcdCluster::spawn(int i, bool fresh) {
  auto peer = [&](int m) { return "http://127.0.0.1:" + std::to_string(base_port_ + 2 * m + 1); };
  std::string cluster;
  for (int m = 0; m < size(); ++m) cluster += (m ? "," : "") + member_name(m) + "=" + peer(m);
  std::vector<std::string> args = {kEtcd,
                                   "--name", member_name(i),
                                   "--data-dir", dir_ + "/" + member_name(i),
                                   "--listen-client-urls", client_url(i),
                                   "--advertise-client-urls", client_url(i),
                                   "--listen-peer-urls", peer(i),
                                   "--initial-advertise-peer-urls", peer(i),
                                   "--initial-cluster", cluster,
                                   "--initial-cluster-state", fresh ? "new" : "existing",
                                   "--initial-cluster-token", "plumb-test",
                                   "--heartbeat-interval", "50",
                                   "--election-timeout", "500",
                                   "--logger", "zap",
                                   "--log-level", "warn"};
  if (tls_ != nullptr) {
    for (const std::string& a : {std::string("--cert-file"), tls_->server_cert, std::string("--key-file"), tls_->server_key,
                                  std::string("--trusted-ca-file"), tls_->ca, std::string("--client-cert-auth")}) {
      args.push_back(a);
    }
  }
  std::string log = dir_ + "/" + member_name(i) + ".log";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (null >= 0) ::dup2(null, 0);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kEtcd, argv.data());
    ::_exit(127);
  }
  pids_[static_cast<size_t>(i)] = pid > 0 ? pid : 0;
}

void EtcdCluster::kill(int i) {
  pid_t& pid = pids_[static_cast<size_t>(i)];
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid = 0;
}

bool EtcdCluster::restart(int i) {
  kill(i);
  spawn(i, false);
  return wait_healthy(i, kStartTimeoutMs);
}

bool EtcdCluster::wait_healthy(int i, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t& pid = pids_[static_cast<size_t>(i)];
    if (pid <= 0) return false;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {  // it exited (bad flags, port in use): reaped
      pid = 0;
      return false;
    }
    auto body = ask(client_url(i) + "/health", nullptr, tls_, 1000);
    if (body && body->find("\"true\"") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int EtcdCluster::leader() const {
  for (int i = 0; i < size(); ++i) {
    if (pids_[static_cast<size_t>(i)] <= 0) continue;
    auto body = ask(client_url(i) + "/v3/maintenance/status", "{}", tls_, 2000);
    if (!body) continue;
    rapidjson::Document d;
    d.Parse(body->c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("leader") || !d["leader"].IsString()) continue;
    std::string leader = d["leader"].GetString();
    // Ask each member for its own id and find the one that is the leader.
    for (int j = 0; j < size(); ++j) {
      if (pids_[static_cast<size_t>(j)] <= 0) continue;
      auto b = ask(client_url(j) + "/v3/maintenance/status", "{}", tls_, 2000);
      if (!b) continue;
      rapidjson::Document e;
      e.Parse(b->c_str());
      if (e.HasParseError() || !e.IsObject() || !e.HasMember("header")) continue;
      const auto& h = e["header"];
      if (h.HasMember("member_id") && h["member_id"].IsString() && leader == h["member_id"].GetString()) return j;
    }
    return -1;
  }
  return -1;
}

bool EtcdCluster::enable_auth(const std::string& user, const std::string& password) {
  std::string base = std::string(kEtcdctl) + " --endpoints=" + client_url(0);
  if (tls_ != nullptr) base += " --cacert=" + quote(tls_->ca) + " --cert=" + quote(tls_->client_cert) + " --key=" + quote(tls_->client_key);
  std::string log = " >>" + quote(dir_ + "/etcdctl.log") + " 2>&1";
  for (const std::string& cmd : {std::string(" user add root:plumb-test-root"), std::string(" user grant-role root root"),
                                 " user add " + quote(user + ":" + password), std::string(" role add plumb-rw"),
                                 std::string(" role grant-permission plumb-rw --prefix=true readwrite /plumb/"),
                                 " user grant-role " + quote(user) + " plumb-rw", std::string(" auth enable")}) {
    if (std::system((base + cmd + log).c_str()) != 0) return false;
  }
  return true;
}

std::string EtcdCluster::log(int i) const {
  std::ifstream f(dir_ + "/" + member_name(i) + ".log");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace plumb::test
