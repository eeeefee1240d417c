// `plumb daemon` (daemon.hpp): the listening process. It never runs a CNI verb itself: it accepts
// a shim's connection, hands it to an idle worker (worker.cpp) over that worker's control socket,
// keeps its own copy to see the shim end early and to answer the shim of a worker that died in
// the invocation (a worker that finishes answers its shim itself, wire.hpp). One poll loop, one
// thread; signals arrive on a signalfd.
#include "cni-entry/daemon/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cni-entry/daemon/cache.hpp"
#include "cni-entry/daemon/metrics.hpp"
#include "cni-entry/daemon/socket_dir.hpp"
#include "cni-entry/daemon/wire.hpp"
#include "engine/base/file.hpp"
#include "engine/k8s/client.hpp"
#include "plumb/version.hpp"

namespace plumb::daemon {
namespace {

namespace wire = daemon_wire;

/// Worker processes at most, spare ones of a single invocation included.
constexpr size_t kMaxWorkers = 512;

/// One worker process: idle, or busy with the shim on `conn`.
struct Worker {
  pid_t pid = -1;
  int control = -1;       ///< the daemon's end of the worker's socketpair; -1 once it ended
  int conn = -1;          ///< the shim's connection while busy; -1 after the worker's Done, an answer, or the shim's end
  bool busy = false;      ///< holds a connection (until its Done or its death)
  bool retiring = false;  ///< said it exits: gets no more connections
};

/// Answers a shim (with `st`, or not at all when its worker answered it) and closes the daemon's
/// copy of its connection.
void answer(int& conn, std::optional<wire::Status> st) {
  if (conn < 0) return;
  if (st) (void)wire::send_status(conn, *st);
  ::close(conn);
  conn = -1;
}

class Daemon {
 public:
  Daemon(Options o, CniMain cni_main) : o_(std::move(o)), cni_main_(cni_main) {}
  /// Sets up the watched caches when the daemon has API credentials and a node name; false
  /// (stderr says why) for a kubeconfig that cannot be loaded.
  bool configure_cache();
  /// Whether the watched caches are set up.
  [[nodiscard]] bool watching() const { return cache_.has_value(); }
  ~Daemon();
  /// Binds the socket and the signalfd, and starts the metrics process when asked for; false
  /// (stderr says why) when it cannot.
  bool start();
  /// The poll loop, until a stop signal and the end of the last worker.
  void run();

 private:
  bool fork_worker(int max_requests);
  void top_up();
  bool hand_over(Worker& w);
  void dispatch();
  void accept_one();
  void on_control(Worker& w);
  void answer_lookup(const Worker& w, std::string_view question);
  void reap();
  void log_usage(pid_t pid, const char* end, int value, int64_t cpu_us, int64_t minflt, int64_t maxrss_kib) const;
  void stop();
  void report_state();

  Options o_;
  CniMain cni_main_;
  int listen_ = -1, signals_ = -1;
  ino_t socket_ino_ = 0;
  bool stopping_ = false;
  std::vector<Worker> workers_;
  std::deque<int> pending_;  ///< accepted connections waiting for an idle worker
  std::optional<Cache> cache_;  ///< the watched caches, when configured
  Metrics metrics_;             ///< the metrics process, with --metrics-bind-address
};

Daemon::~Daemon() {
  for (auto& w : workers_) {
    if (w.control >= 0) ::close(w.control);
    if (w.conn >= 0) ::close(w.conn);
  }
  for (int c : pending_) ::close(c);
  if (listen_ >= 0) ::close(listen_);
  if (signals_ >= 0) ::close(signals_);
  if (cache_) cache_->stop();
}

bool Daemon::configure_cache() {
  if (o_.node_name.empty()) return true;
  auto creds = k8s::configured(o_.kubeconfig);
  if (!creds) {
    std::fprintf(stderr, "plumb daemon: --kubeconfig: %s\n", creds.error().text().c_str());
    return false;
  }
  if (!*creds) return true;
  cache_.emplace(source::WatchSetup{std::move(**creds), o_.node_name});
  for (PodEvents* observer : o_.pod_observers) cache_->subscribe(observer);
  cache_->on_request = [this](source::Watched kind, std::string_view verb, std::string_view outcome, double seconds) {
    metrics_.api_request(kind == source::Watched::kPod   ? "pods"
                         : kind == source::Watched::kNad ? "nads"
                                                         : "ipamclaims",
                         verb, outcome, static_cast<int64_t>(seconds * 1e6));
  };
  return true;
}

/// Whether something answers on the unix socket at `addr`.
bool answering(const sockaddr_un& addr) {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  const bool ok = ::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(s);
  return ok;
}

bool Daemon::start() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (o_.socket.empty() || o_.socket.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr, "plumb daemon: --socket \"%s\" is not a usable unix socket path\n", o_.socket.c_str());
    return false;
  }
  std::memcpy(addr.sun_path, o_.socket.c_str(), o_.socket.size() + 1);
  if (const size_t slash = o_.socket.rfind('/'); slash != std::string::npos && slash > 0) {
    if (auto made = mkdir_p(o_.socket.substr(0, slash), 0755); !made) {
      std::fprintf(stderr, "plumb daemon: %s\n", made.error().text().c_str());
      return false;
    }
  }
  if (char why[4096]; wire::socket_dir_trust(o_.socket.c_str(), ::geteuid(), why, sizeof why) != wire::DirTrust::kTrusted) {
    std::fprintf(stderr, "plumb daemon: refusing to listen on %s: %s (whoever can write there can replace the socket)\n",
                 o_.socket.c_str(), why);
    return false;
  }
  if (answering(addr)) {
    std::fprintf(stderr, "plumb daemon: another daemon answers on %s\n", o_.socket.c_str());
    return false;
  }
  ::unlink(o_.socket.c_str());  // a socket left by a daemon that was killed
  listen_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const mode_t old = ::umask(0177);  // the socket appears 0600
  const bool bound = listen_ >= 0 && ::bind(listen_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(old);
  struct stat st{};
  if (!bound || ::listen(listen_, 128) != 0 || ::stat(o_.socket.c_str(), &st) != 0) {
    std::fprintf(stderr, "plumb daemon: listening on %s: %s\n", o_.socket.c_str(), std::strerror(errno));
    return false;
  }
  socket_ino_ = st.st_ino;
  ::signal(SIGPIPE, SIG_IGN);  // a closed stderr must not end the daemon (workers restore it)
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT}) sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  signals_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  return signals_ >= 0 && (o_.metrics_bind_address.empty() || metrics_.start(o_.metrics_bind_address, o_.kubeconfig));
}

/// Forks one worker that serves up to `max_requests` invocations; false (stderr says why) when
/// it cannot.
bool Daemon::fork_worker(int max_requests) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    std::fprintf(stderr, "plumb daemon: socketpair: %s\n", std::strerror(errno));
    return false;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Nothing of the daemon's stays open in a worker but its control socket and stderr.
    ::dup2(pair[1], 3);
    ::dup2(2, 4);
    ::close_range(5, ~0U, 0);
    detail::worker_main(3, 4, max_requests, cni_main_, cache_.has_value(), o_.json_log);
  }
  ::close(pair[1]);
  if (pid < 0) {
    ::close(pair[0]);
    std::fprintf(stderr, "plumb daemon: fork: %s\n", std::strerror(errno));
    return false;
  }
  if (cache_) {  // a lookup's answer is one message: room for an object of kMaxLookupAnswer
    const int size = static_cast<int>(detail::kMaxLookupAnswer + 4096);
    if (::setsockopt(pair[0], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0)
      (void)::setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  }
  workers_.push_back(Worker{pid, pair[0], -1, false, false});
  return true;
}

/// Forks workers until `workers` are alive and not retiring.
void Daemon::top_up() {
  int alive = 0;
  for (const auto& w : workers_) alive += w.retiring ? 0 : 1;
  while (!stopping_ && alive < o_.workers && fork_worker(o_.requests_per_worker)) ++alive;
}

/// Hands the oldest waiting connection to the idle worker `w`; false when `w` is gone (it is
/// killed then, and reaped later like any other).
bool Daemon::hand_over(Worker& w) {
  const int conn = pending_.front();
  const char one = 0;
  if (!wire::send_with_fds(w.control, &one, 1, &conn, 1)) {
    ::kill(w.pid, SIGKILL);  // unreaped, so the pid is still this worker's
    w.retiring = true;
    return false;
  }
  pending_.pop_front();
  w.busy = true;
  w.conn = conn;
  return true;
}

/// Hands waiting connections to idle workers. No invocation waits behind busy ones (an ADD stuck
/// on an API server that does not answer must not hold up a DEL, README "In a Kubernetes
/// cluster"): for each connection still waiting, a worker of one invocation is forked, up to
/// kMaxWorkers processes.
void Daemon::dispatch() {
  for (size_t i = 0; i < workers_.size() && !pending_.empty(); ++i) {
    Worker& w = workers_[i];
    if (!w.busy && !w.retiring && w.control >= 0) (void)hand_over(w);
  }
  while (!pending_.empty() && workers_.size() < kMaxWorkers && fork_worker(1)) (void)hand_over(workers_.back());
}

void Daemon::accept_one() {
  const int conn = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || (peer.uid != 0 && peer.uid != ::geteuid())) {
    std::fprintf(stderr, "plumb daemon: refused a connection from uid %u (only root and uid %u)\n", peer.uid, ::geteuid());
    ::close(conn);
    return;
  }
  pending_.push_back(conn);
}

/// A worker's control socket is readable: its Done (it answers its shim itself, right after), or
/// its end.
void Daemon::on_control(Worker& w) {
  char message[4096];
  static_assert(sizeof(detail::Done) + detail::kMaxRequestSamples * sizeof(RequestSample) <= sizeof message);
  const ssize_t n = ::recv(w.control, message, sizeof message, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  constexpr size_t magic = sizeof detail::kLookupMagic;
  if (n > static_cast<ssize_t>(magic) && std::memcmp(message, detail::kLookupMagic, magic) == 0) {
    answer_lookup(w, std::string_view(message + magic, static_cast<size_t>(n) - magic));
    return;
  }
  detail::Done done{};
  const bool is_done =
      n >= static_cast<ssize_t>(sizeof done) && (static_cast<size_t>(n) - sizeof done) % sizeof(RequestSample) == 0;
  if (is_done) std::memcpy(&done, message, sizeof done);
  for (size_t at = sizeof done; is_done && at < static_cast<size_t>(n); at += sizeof(RequestSample)) {
    RequestSample r;  // the invocation's requests, after its Done
    std::memcpy(&r, message + at, sizeof r);
    metrics_.worker_request(r);
  }
  if (!is_done) {  // it ended: reap() answers its shim
    ::close(w.control);
    w.control = -1;
    w.retiring = true;
    return;
  }
  const bool logged = w.conn >= 0;
  answer(w.conn, std::nullopt);  // no longer watched: the shim's end from now on is no early end
  if (!o_.usage_log.empty() && logged) log_usage(w.pid, "exit", done.exit_code, done.cpu_us, done.minflt, done.maxrss_kib);
  if (logged && done.verb[0] != '\0')
    metrics_.invocation(std::string_view(done.verb, strnlen(done.verb, sizeof done.verb)),
                        static_cast<unsigned>(done.cni_code), done.duration_us);
  if (done.more != 0) return;  // busy until its second Done
  w.busy = false;
  w.retiring = done.retiring != 0;
}

/// Answers a worker's lookup (daemon.hpp, kLookupMagic): `question` is the collection, the
/// server, NUL, "ns/name".
void Daemon::answer_lookup(const Worker& w, std::string_view question) {
  const std::string* object = nullptr;
  if (const size_t nul = question.find('\0'); cache_ && nul != std::string_view::npos && nul >= 1) {
    object = cache_->find(static_cast<source::Watched>(question[0]), question.substr(1, nul - 1),
                          std::string(question.substr(nul + 1)));
  }
  if (object != nullptr && object->size() < detail::kMaxLookupAnswer) {
    const iovec parts[2] = {{const_cast<char*>("1"), 1}, {const_cast<char*>(object->data()), object->size()}};
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(parts);
    msg.msg_iovlen = 2;
    if (::sendmsg(w.control, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(1 + object->size())) return;
  }
  (void)::send(w.control, "0", 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // not held, or too large to pass
}

void Daemon::reap() {
  for (;;) {
    int status = 0;
    rusage ru{};
    const pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0) return;
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      if (w.pid != pid) continue;
      if (!o_.usage_log.empty() && w.conn >= 0) {  // the whole worker's use: it died in this invocation
        log_usage(pid, WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), detail::cpu_us(ru),
                  ru.ru_minflt, ru.ru_maxrss);
      }
      // A worker that ends holding a connection ended in the middle of the invocation.
      answer(w.conn, WIFSIGNALED(status) ? wire::Status{wire::End::kSignalled, WTERMSIG(status)}
                                         : wire::Status{wire::End::kExited, WEXITSTATUS(status)});  // died before its Done
      if (w.control >= 0) ::close(w.control);
      workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

/// One line per invocation: "pid=N exit=N cpu_us=N minflt=N maxrss_kib=N" ("signal=N" for a
/// worker that died in it, whose figures are then its whole life's), appended with one write.
void Daemon::log_usage(pid_t pid, const char* end, int value, int64_t cpu_us, int64_t minflt, int64_t maxrss_kib) const {
  char line[192];
  const int n = std::snprintf(line, sizeof line, "pid=%d %s=%d cpu_us=%lld minflt=%lld maxrss_kib=%lld\n", pid, end, value,
                              static_cast<long long>(cpu_us), static_cast<long long>(minflt), static_cast<long long>(maxrss_kib));
  const int fd = ::open(o_.usage_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  (void)!::write(fd, line, static_cast<size_t>(n));
  ::close(fd);
}

/// Tells the metrics process (when there is one) the workers' and the caches' state.
void Daemon::report_state() {
  if (!metrics_.running()) return;
  MetricsUpdate s;
  int alive = 0;
  for (const auto& w : workers_) {
    s.busy += w.busy ? 1 : 0;
    s.idle += !w.busy && !w.retiring && w.control >= 0 ? 1 : 0;
    alive += w.retiring ? 0 : 1;
  }
  s.listening = listen_ >= 0 ? 1 : 0;
  s.workers_up = alive >= o_.workers ? 1 : 0;
  s.watching = cache_ ? 1 : 0;
  s.synced = cache_ && cache_->synced() ? 1 : 0;
  metrics_.state(s);
}

/// Stops accepting (the socket goes, if it is still this daemon's); the connections already
/// accepted are still served.
void Daemon::stop() {
  stopping_ = true;
  if (cache_) cache_->stop();
  if (listen_ < 0) return;
  struct stat st{};
  if (::stat(o_.socket.c_str(), &st) == 0 && st.st_ino == socket_ino_) ::unlink(o_.socket.c_str());
  ::close(listen_);
  listen_ = -1;
}

void Daemon::run() {
  top_up();
  std::vector<pollfd> fds;
  std::vector<std::pair<pid_t, bool>> owner;  // fds[i] from 2: (worker, true = its control, false = its shim)
  while (!(stopping_ && workers_.empty())) {
    if (stopping_ && pending_.empty()) {
      for (auto& w : workers_) {
        if (w.busy || w.control < 0) continue;
        ::close(w.control);  // an idle worker reads the end of its control socket and exits
        w.control = -1;
      }
    }
    if (cache_ && !stopping_) (void)cache_->start();  // none yet, or the last one ended
    const int cache_fd = cache_ ? cache_->fd() : -1;
    const int metrics_wait = stopping_ ? -1 : metrics_.restart();  // a metrics process that ended, again
    fds.assign({{signals_, POLLIN, 0}, {listen_, POLLIN, 0}, {cache_fd, POLLIN, 0}, {metrics_.fd(), POLLIN, 0}});
    owner.assign(fds.size(), {-1, false});
    for (const auto& w : workers_) {
      if (w.control >= 0) fds.push_back({w.control, POLLIN, 0}), owner.emplace_back(w.pid, true);
      if (w.conn >= 0) fds.push_back({w.conn, POLLRDHUP, 0}), owner.emplace_back(w.pid, false);
    }
    // A cache process that ended is forked again within a second.
    int timeout = cache_ && cache_fd < 0 && !stopping_ ? 1000 : -1;
    if (metrics_wait >= 0 && (timeout < 0 || metrics_wait < timeout)) timeout = metrics_wait;
    report_state();
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    if (cache_fd >= 0 && fds[2].revents != 0) cache_->on_readable();
    if (fds[3].fd >= 0 && fds[3].revents != 0) metrics_.ended();  // it never writes after its '1': it is gone
    for (size_t i = 4; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (auto& w : workers_) {
        if (w.pid != owner[i].first) continue;
        if (owner[i].second && w.control == fds[i].fd) on_control(w);
        if (!owner[i].second && w.conn == fds[i].fd) {
          // The shim ended before its answer: the runtime ended the plugin, so its worker ends
          // too, as the runtime's kill would have ended an exec'd plumb. Reaped below or later.
          ::kill(w.pid, SIGKILL);
          ::close(w.conn);
          w.conn = -1;
          w.retiring = true;
        }
      }
    }
    if ((fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo si{};
      while (::read(signals_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) stop();
      }
      reap();
    }
    if (listen_ >= 0 && (fds[1].revents & POLLIN) != 0) accept_one();
    top_up();
    dispatch();
  }
}

}  // namespace

int run(const Options& o, CniMain cni_main) {
  Daemon d(o, cni_main);
  if (!d.configure_cache() || !d.start()) return 1;
  std::fprintf(stderr, "plumb daemon %s: listening on %s, %d workers of %d invocations each%s%s\n", version::kFull,
               o.socket.c_str(), o.workers, o.requests_per_worker, d.watching() ? "; watching the pods of node " : "",
               d.watching() ? o.node_name.c_str() : "");
  d.run();
  return 0;
}

}  // namespace plumb::daemon
