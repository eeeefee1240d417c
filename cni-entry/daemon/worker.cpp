// A worker of `plumb daemon` (daemon.hpp): takes one connection at a time from the daemon, puts
// the shim's descriptors in place, runs the CNI plugin's entry point as an exec'd plumb would,
// with the shim's CNI variables as its CNI environment, then puts everything back as it was
// before the invocation.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cni-entry/daemon/daemon.hpp"
#include "cni-entry/daemon/metrics.hpp"
#include "cni-entry/daemon/recv_fds.hpp"
#include "cni-entry/daemon/wire.hpp"
#include "cni-entry/pod/attach.hpp"
#include "cni-entry/source/after_answer.hpp"
#include "cni-entry/source/watched.hpp"
#include "engine/base/file.hpp"
#include "engine/k8s/client.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::daemon::detail {
namespace {

namespace wire = daemon_wire;

/// The current request's CNI variables, by their index in wire::kCniVariables: pointers to the
/// values inside the request's body (nullptr: not in the request). Never the process's
/// environment: glibc's setenv() keeps every "NAME=value" string it ever made (setenv.c's
/// known_values), so a worker setting each pod's container ID, netns and CNI_ARGS grew with
/// every pod it served.
const char* request_values[std::size(wire::kCniVariables)] = {};

/// The CniMain's getenv: a CNI variable's value in the current request, nullptr for any other
/// name or one the request does not carry.
const char* request_getenv(const char* name) {
  for (size_t i = 0; i < std::size(wire::kCniVariables); ++i) {
    if (std::strcmp(name, wire::kCniVariables[i]) == 0) return request_values[i];
  }
  return nullptr;
}

/// Puts a request in place: its descriptors as 0, 1 and 2, its CNI variables as request_getenv's
/// (pointing into `body`, which must outlive the invocation). Returns false for a message that
/// is not a request (nothing changed then).
bool install_request(char* body, size_t len, const int* fds, int nfds) {
  const size_t magic = sizeof wire::kRequestMagic;
  if (nfds != 3 || len < magic || std::memcmp(body, wire::kRequestMagic, magic) != 0 || body[len - 1] != '\0') return false;
  for (auto& v : request_values) v = nullptr;
  for (size_t off = magic; off < len;) {
    const char* entry = body + off;
    off += std::strlen(entry) + 1;
    const std::string_view name(entry, std::strcspn(entry, "="));
    if (entry[name.size()] != '=') continue;
    for (size_t i = 0; i < std::size(wire::kCniVariables); ++i) {
      if (name == wire::kCniVariables[i]) request_values[i] = entry + name.size() + 1;
    }
  }
  for (int i = 0; i < 3; ++i) ::dup2(fds[i], i);  // the copies lose FD_CLOEXEC
  return true;
}

/// The worker's /dev/null (close-on-exec: no plugin plumb runs inherits it), opened once it can
/// be; -1 while it cannot (descriptors exhausted, a /dev without it).
int dev_null() {
  static int null = -1;
  if (null < 0) null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  return null;
}

/// Between invocations: /dev/null as stdin and stdout, the daemon's stderr as stderr, so that
/// the runtime's pipes close when the shim exits (the runtime reads stdout to its end). Returns
/// false, 0 and 1 left as they were, when there is no /dev/null.
bool park_stdio(int log) {
  ::dup2(log, 2);
  const int null = dev_null();
  return null >= 0 && ::dup2(null, 0) == 0 && ::dup2(null, 1) == 1;
}

/// What serve() did: the invocation's exit code, whether the worker can serve another, and the
/// shim's connection, still to be answered.
struct Served {
  int code = 0;
  bool retire = false;
  int conn = -1;
  std::optional<Outcome> outcome;  ///< what the invocation noted, for its log line
  double ms = 0;                   ///< how long it took
};

/// Serves the connection `conn` (kept open: the caller answers the shim on it): the invocation's
/// exit code (2 for a message that is not plumb-shim's request, reported on the daemon's stderr).
/// Retires the worker when the runtime's stdin and stdout could not be parked on /dev/null: they
/// are closed instead (the runtime's pipes must close all the same), and nothing may take
/// descriptors 0 and 1 before a next request's.
Served serve(int conn, int log, CniMain cni_main) {
  static char body[wire::kMaxRequestBytes];
  int fds[3] = {-1, -1, -1};
  int nfds = 0;
  const ssize_t len = wire::recv_with_fds(conn, body, sizeof body, fds, 3, nfds);
  const bool ok = len > 0 && install_request(body, static_cast<size_t>(len), fds, nfds);
  for (int i = 0; i < nfds; ++i) ::close(fds[i]);
  if (!ok) {
    (void)!::dprintf(log, "plumb daemon: refused a request that is not plumb-shim's (%zd bytes, %d descriptors)\n", len, nfds);
    return {2, false, conn, std::nullopt, 0};
  }
  (void)take_outcome();
  const auto began = std::chrono::steady_clock::now();
  Served out{cni_main(request_getenv), false, conn, take_outcome(), 0};
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  if (!park_stdio(log)) {
    ::close(0);
    ::close(1);
    out.retire = true;
  }
  netlink::release_shared_elsewhere();  // no socket keeps a pod's namespace alive
  invocations::next();                  // kept directories and pools: checked that their names still name them
  return out;
}

/// The daemon's watched caches as a worker reads them: one question and one answer on the
/// control socket (daemon.hpp, kLookupMagic) per object.
class Lookup final : public source::WatchedObjects {
 public:
  explicit Lookup(int control) : control_(control) {}
  std::optional<std::string> find(source::Watched kind, const std::string& server, const std::string& ns,
                                  const std::string& name) override {
    std::string question(kLookupMagic, sizeof kLookupMagic);
    question += static_cast<char>(kind);
    question += server;
    question += '\0';
    question += ns + "/" + name;
    if (::send(control_, question.data(), question.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(question.size()))
      return std::nullopt;
    if (!answer_) answer_.reset(new char[kMaxLookupAnswer + 1]);  // not zeroed: only what answers fill is touched
    ssize_t n;
    do n = ::recv(control_, answer_.get(), kMaxLookupAnswer + 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 1 || answer_[0] != '1') return std::nullopt;
    return std::string(answer_.get() + 1, static_cast<size_t>(n) - 1);
  }

 private:
  int control_;
  std::unique_ptr<char[]> answer_;  ///< the receive buffer, allocated at the first lookup and kept
};

}  // namespace

void worker_main(int control, int log, int max_requests, CniMain cni_main, bool cached, bool json_log) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // as an exec'd plumb starts
  // The heap its invocations grow stays: main() set glibc's thresholds before the daemon forked.
  (void)park_stdio(log);  // without /dev/null, 0 and 1 stay the daemon's: no runtime's pipes
  static Lookup lookup(control);
  if (cached) source::set_watched_objects(&lookup);
  observe_requests();  // the invocations' API server and etcd requests, sent with each Done
  // Forwarding and gateway addresses, watched rather than asked again.
  pod::remember_node_facts();
  static std::vector<std::function<void()>> later;  // what the invocation left for after its answer
  source::after_answer_queue() = &later;
  k8s::keep_clients(true);  // one API server connection for all its invocations
  invocations::keep_across();  // and the state directory's, the pools' descriptors (engine/base/file.hpp)
  for (int served = 1;; ++served) {
    char one;
    int conn = -1, nconn = 0;
    if (wire::recv_with_fds(control, &one, 1, &conn, 1, nconn) <= 0 || nconn != 1) ::_exit(0);  // the daemon stops
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    const Served s = serve(conn, log, cni_main);
    ::getrusage(RUSAGE_SELF, &after);
    Done done{s.code,
              served >= max_requests || s.retire ? 1 : 0,
              cpu_us(after) - cpu_us(before),
              after.ru_minflt - before.ru_minflt,
              after.ru_maxrss,
              later.empty() ? 0 : 1,
              {},
              0,
              static_cast<int64_t>(s.ms * 1000)};
    if (s.outcome) {
      s.outcome->verb.copy(done.verb, sizeof done.verb - 1);
      done.cni_code = static_cast<int32_t>(s.outcome->code);
    }
    // The daemon first (it stops watching the shim, whose end is no early end from now on), then
    // the shim, answered here rather than through the daemon: one wake-up less before it exits.
    const bool told = send_with_requests(control, &done, sizeof done);
    (void)wire::send_status(s.conn, {wire::End::kExited, s.code});
    ::close(s.conn);
    if (s.outcome) {  // once the runtime has its answer; one write, whole
      const std::string line = outcome_line(*s.outcome, s.ms, json_log);
      (void)!::write(log, line.data(), line.size());
    }
    if (told && done.more != 0) {
      // Still busy for the daemon until the second Done: no invocation is handed over meanwhile.
      for (auto& work : later) work();
      done.more = 0;
      done.cpu_us = done.minflt = 0;
      (void)send_with_requests(control, &done, sizeof done);
    }
    later.clear();
    if (!told || done.retiring != 0) ::_exit(0);
  }
}

}  // namespace plumb::daemon::detail
