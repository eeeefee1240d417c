// The daemon's side of its metrics process (metrics.hpp): the fork, the messages.
#include "cni-entry/daemon/metrics.hpp"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace plumb::daemon {

namespace detail {

bool valid_bind_address(const std::string& bind, std::string& why) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos) {
    why = "not HOST:PORT";
    return false;
  }
  std::string host = bind.substr(0, colon);
  const std::string port = bind.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535) {
    why = "the port is not a number from 1 to 65535";
    return false;
  }
  unsigned char address[16];
  const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (v6) host = host.substr(1, host.size() - 2);
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), address) != 1) {
    why = "the host is not an IPv4 address or an IPv6 address in brackets";
    return false;
  }
  return true;
}

}  // namespace detail

Metrics::~Metrics() {
  if (fd_ >= 0) ::close(fd_);  // the metrics process reads the end and exits
}

bool Metrics::start(const std::string& bind, const std::string& kubeconfig) {
  if (std::string why; !detail::valid_bind_address(bind, why)) {
    std::fprintf(stderr, "plumb daemon: --metrics-bind-address \"%s\": %s\n", bind.c_str(), why.c_str());
    return false;
  }
  bind_ = bind;
  kubeconfig_ = kubeconfig;
  if (fork_server()) return true;
  bind_.clear();
  return false;
}

/// Forks the metrics process on bind_ and waits (at most 10 s) until it listens or says why not.
bool Metrics::fork_server() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    std::fprintf(stderr, "plumb daemon: socketpair: %s\n", std::strerror(errno));
    return false;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the daemon it reports on
    if (::getppid() != parent) ::_exit(0);
    ::prctl(PR_SET_NAME, "plumb-metrics");  // told apart from the workers in ps and /proc
    ::dup2(pair[1], 3);
    ::close_range(4, ~0U, 0);
    detail::metrics_main(3, bind_, kubeconfig_);
  }
  ::close(pair[1]);
  const timeval wait{10, 0};  // a server that neither listens nor fails must not stall the daemon
  (void)::setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char ok = '0';
  if (pid < 0 || ::recv(pair[0], &ok, 1, 0) != 1 || ok != '1') {
    if (pid < 0) std::fprintf(stderr, "plumb daemon: fork: %s\n", std::strerror(errno));
    ::close(pair[0]);
    if (pid > 0) {
      ::kill(pid, SIGKILL);  // not reaped yet, so still this child: it said why on stderr, or hangs
      ::waitpid(pid, nullptr, 0);
    }
    return false;
  }
  fd_ = pair[0];
  started_ = std::chrono::steady_clock::now();
  sent_state_ = false;  // a new process knows nothing yet
  return true;
}

void Metrics::ended() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  const auto now = std::chrono::steady_clock::now();
  if (now - started_ >= std::chrono::minutes(1)) backoff_ = std::chrono::milliseconds(1000);
  next_start_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(30000));
  std::fprintf(
      stderr, "plumb daemon: the metrics process ended; started again in %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(next_start_ - now).count()));
}

int Metrics::restart() {
  if (bind_.empty() || fd_ >= 0) return -1;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_start_)
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_start_ - now).count()) + 1;
  if (fork_server()) return -1;
  next_start_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(30000));
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_start_ - now).count()) + 1;
}

using detail::put;

void Metrics::invocation(std::string_view verb, unsigned code, int64_t us) {
  if (fd_ < 0) return;
  MetricsUpdate m;
  m.kind = MetricsUpdate::kInvocation;
  put(m.verb, verb);
  m.code = static_cast<int32_t>(code);
  m.duration_us = us;
  (void)::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);  // a full queue loses a sample, never blocks the daemon
}

void Metrics::api_request(std::string_view resource, std::string_view verb, std::string_view outcome, int64_t us) {
  if (fd_ < 0) return;
  MetricsUpdate m;
  m.kind = MetricsUpdate::kApiRequest;
  put(m.verb, verb);
  put(m.resource, resource);
  put(m.outcome, outcome);
  m.duration_us = us;
  (void)::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Metrics::worker_request(const RequestSample& r) {
  if (fd_ < 0) return;
  MetricsUpdate m;
  m.kind = MetricsUpdate::kWorkerRequest;
  m.request = r;
  (void)::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Metrics::state(const MetricsUpdate& s) {
  if (fd_ < 0) return;
  if (sent_state_ && s.busy == last_.busy && s.idle == last_.idle && s.listening == last_.listening &&
      s.workers_up == last_.workers_up && s.watching == last_.watching && s.synced == last_.synced)
    return;
  MetricsUpdate m = s;
  m.kind = MetricsUpdate::kState;
  if (::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof m)) {
    last_ = m;
    sent_state_ = true;
  }
}

}  // namespace plumb::daemon
