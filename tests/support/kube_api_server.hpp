// Drives tests/support/kube_api_test_server.py (a small Kubernetes API *test* server) from an
// integration test: started as a child process in the test's current network namespace (build
// the Node first: 127.0.0.1 is then the node's loopback, which plumb shares), stopped by pid.
// Objects, tokens and faults are files under its directory (see the script's docstring).
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/pod_fixture.hpp"

namespace plumb::test {

class KubeApiServer {
 public:
  /// Starts the server with its data under `dir` (created), listening on `host` (an address of
  /// the test's current namespace; its certificate names it). Waits up to 20 s for it to listen
  /// (the first start makes certificates with openssl); fails the test (REQUIRE) otherwise.
  explicit KubeApiServer(std::string dir, std::string host = "127.0.0.1")
      : dir_(std::move(dir)), host_(std::move(host)) {
    std::filesystem::create_directories(dir_ + "/objects");
    start();
  }
  ~KubeApiServer() { stop(); }
  KubeApiServer(const KubeApiServer&) = delete;
  KubeApiServer& operator=(const KubeApiServer&) = delete;

  /// Kills the server (SIGTERM, then SIGKILL) and reaps it. Idempotent.
  void stop() { stop_child(pid_); }
  /// Starts it again on the same port (after stop()).
  void restart() {
    stop();
    start(port_);
  }

  int port() const { return port_; }
  std::string url() const { return "https://" + host_ + ":" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  std::string tls(const std::string& file) const { return dir_ + "/tls/" + file; }

  /// Writes (replaces) an object: resource is "pods", "network-attachment-definitions" or
  /// "ipamclaims"; `json` the whole object.
  void put(const std::string& resource, const std::string& ns, const std::string& name, const std::string& json) const {
    write_file(object_path(resource, ns, name), json);
  }
  /// The stored object ("" if none).
  std::string get(const std::string& resource, const std::string& ns, const std::string& name) const {
    return read_file(object_path(resource, ns, name));
  }
  void remove(const std::string& resource, const std::string& ns, const std::string& name) const {
    std::filesystem::remove(object_path(resource, ns, name));
  }
  /// Replaces the accepted bearer tokens.
  void set_tokens(const std::vector<std::string>& tokens) const {
    std::string s;
    for (auto& t : tokens) s += t + "\n";
    write_file(dir_ + "/tokens", s);
  }
  /// Replaces the fault rules (a JSON list, see the script); "[]" clears them.
  void set_faults(const std::string& json_list) const { write_file(dir_ + "/faults.json", json_list); }

  /// Replaces <dir>/watch-control.json (see the script: "drop", "compact", "hold") at once (a
  /// rename: the server never reads it half-written).
  void set_watch_control(const std::string& json) const {
    write_file(dir_ + "/watch-control.json.tmp", json);
    std::filesystem::rename(dir_ + "/watch-control.json.tmp", dir_ + "/watch-control.json");
  }

  /// Every request so far: "METHOD /path STATUS AUTH".
  std::vector<std::string> requests() const { return lines_of(read_file(dir_ + "/requests.log")); }
  /// Requests whose method and path (query excluded) are exactly these; status "" = any.
  size_t count(const std::string& method, const std::string& path, const std::string& status = "") const {
    size_t n = 0;
    for (auto& r : requests()) {
      std::string prefix = method + " " + path;
      if (r.rfind(prefix, 0) != 0) continue;
      char next = r.size() > prefix.size() ? r[prefix.size()] : '\0';
      if (next != ' ' && next != '?') continue;
      if (!status.empty() && r.find(" " + status + " ") == std::string::npos) continue;
      ++n;
    }
    return n;
  }
  void clear_requests() const { std::filesystem::remove(dir_ + "/requests.log"); }
  /// The TLS connections accepted so far (connections.log, one line each).
  size_t tls_connections() const { return lines_of(read_file(dir_ + "/connections.log")).size(); }

  /// Writes a kubeconfig for this server at `path`. `user_yaml` is the user's map body, e.g.
  /// "tokenFile: /x" or "client-certificate: /a\n    client-key: /b" (4-space indent).
  void write_kubeconfig(const std::string& path, const std::string& user_yaml, bool ca_inline = true) const {
    std::string ca = ca_inline ? "certificate-authority-data: " + base64_of(tls("ca.crt"))
                               : "certificate-authority: " + tls("ca.crt");
    write_file(path,
               "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: test-cluster\n  cluster:\n    "
               "server: " +
                   url() + "\n    " + ca +
                   "\ncontexts:\n- name: other\n  context:\n    cluster: nowhere\n    user: nobody\n- name: test\n  "
                   "context:\n    cluster: test-cluster\n    user: plumb\n"
                   "users:\n- name: plumb\n  user:\n    " +
                   user_yaml + "\n");
  }

  /// base64 of a file's bytes (one line).
  static std::string base64_of(const std::string& file) {
    Proc p = sh("base64 -w0 " + file);
    REQUIRE(p.exit_code == 0);
    return p.out;
  }

 private:
  std::string object_path(const std::string& resource, const std::string& ns, const std::string& name) const {
    return dir_ + "/objects/" + resource + "/" + ns + "/" + name + ".json";
  }

  void start(int port = 0) {
    std::filesystem::remove(dir_ + "/port");
    std::string script = std::string(PLUMB_FIXTURES) + "/../support/kube_api_test_server.py";
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      int log = ::open((dir_ + "/server.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      std::string p = std::to_string(port);
      ::execlp("python3", "python3", script.c_str(), "--dir", dir_.c_str(), "--port", p.c_str(), "--host",
               host_.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 400; ++i) {
      std::string s = read_file(dir_ + "/port");
      if (!s.empty()) {
        port_ = std::stoi(s);
        return;
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("the Kubernetes API test server exited at start: " << read_file(dir_ + "/server.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("the Kubernetes API test server did not start: " << read_file(dir_ + "/server.log"));
  }

  std::string dir_;
  std::string host_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace plumb::test
