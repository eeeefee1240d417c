// The daemon's watched caches (see cache.hpp).
#include "cni-entry/daemon/cache.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace plumb::daemon {

using source::Watched;
using source::WatchFrame;

Cache::~Cache() {
  if (fd_ >= 0) ::close(fd_);
}

bool Cache::start() {
  const auto now = std::chrono::steady_clock::now();
  if (fd_ >= 0 || (pid_ > 0 && now - forked_ < std::chrono::seconds(1))) return true;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    std::fprintf(stderr, "plumb daemon: cache: socketpair: %s\n", std::strerror(errno));
    return false;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pair[1], 3);
    ::close_range(4, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    source::run_watches(setup_, 3);
    ::_exit(0);
  }
  ::close(pair[1]);
  if (pid < 0) {
    ::close(pair[0]);
    std::fprintf(stderr, "plumb daemon: cache: fork: %s\n", std::strerror(errno));
    return false;
  }
  fd_ = pair[0];
  pid_ = pid;
  forked_ = now;
  buffer_.clear();
  return true;
}

void Cache::stop() {
  if (pid_ > 0 && fd_ >= 0) ::kill(pid_, SIGKILL);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Cache::on_readable() {
  // All that is there (bounded: a relist of thousands of objects must not starve the
  // invocations), so that an invocation accepted in the same round finds it applied.
  for (int round = 0; round < 64; ++round) {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n <= 0) {
      std::fprintf(stderr, "plumb daemon: the cache process %d ended; another one lists again\n", pid_);
      ::close(fd_);
      fd_ = -1;
      break;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  for (;;) {
    auto f = source::take_frame(buffer_);
    if (!f) {
      std::fprintf(stderr, "plumb daemon: %s\n", f.error().text().c_str());
      stop();
      buffer_.clear();
      return;
    }
    if (!*f) return;
    apply(std::move(**f));
  }
}

Cache::Collection& Cache::of(Watched kind) {
  return kind == Watched::kPod ? pods_ : kind == Watched::kNad ? nads_ : claims_;
}
const Cache::Collection* Cache::of(Watched kind) const {
  return kind == Watched::kPod ? &pods_ : kind == Watched::kNad ? &nads_ : kind == Watched::kClaim ? &claims_ : nullptr;
}

void Cache::put(Watched kind, Collection& c, const std::string& key, std::string json) {
  std::string old;
  if (auto s = c.stale.find(key); s != c.stale.end()) {
    old = std::move(s->second);
    c.stale.erase(s);
  } else if (auto it = c.objects.find(key); it != c.objects.end()) {
    old = std::move(it->second);
  }
  const bool changed = old != json;
  std::string& slot = c.objects[key];
  slot = std::move(json);
  if (kind != Watched::kPod || !changed) return;
  for (PodEvents* o : observers_) o->pod_updated(old, slot);
}

void Cache::remove(Watched kind, Collection& c, const std::string& key) {
  auto it = c.objects.find(key);
  if (it == c.objects.end()) return;
  const std::string last = std::move(it->second);
  c.objects.erase(it);
  if (kind == Watched::kPod)
    for (PodEvents* o : observers_) o->pod_deleted(last);
}

void Cache::apply(WatchFrame f) {
  Collection& c = of(f.kind);
  switch (f.op) {
    case WatchFrame::Op::kListed:  // what the list does not name again is gone
      c.stale = std::move(c.objects);
      c.objects.clear();
      c.listing = true;
      break;
    case WatchFrame::Op::kPut:
      put(f.kind, c, f.key, std::move(f.json));
      break;
    case WatchFrame::Op::kDeleted:
      remove(f.kind, c, f.key);
      break;
    case WatchFrame::Op::kSynced: {
      auto gone = std::move(c.stale);
      c.stale.clear();
      for (auto& [key, last] : gone) {
        c.objects[key] = std::move(last);
        remove(f.kind, c, key);
      }
      c.listing = false;
      c.synced = true;
      break;
    }
    case WatchFrame::Op::kRequest:
      if (const size_t space = f.key.find(' '); on_request && space != std::string::npos)
        on_request(f.kind, std::string_view(f.key).substr(0, space), std::string_view(f.key).substr(space + 1),
                   std::atof(f.json.c_str()));
      break;
    case WatchFrame::Op::kFailed:
      std::fprintf(stderr, "plumb daemon: watch of %s: %s (retried)\n",
                   f.kind == Watched::kPod   ? "pods"
                   : f.kind == Watched::kNad ? "NADs"
                                             : "IPAMClaims",
                   f.json.c_str());
      break;
  }
}

const std::string* Cache::find(Watched kind, std::string_view server, const std::string& key) const {
  const Collection* c = of(kind);
  if (c == nullptr || server != setup_.creds.server) return nullptr;
  auto it = c->objects.find(key);
  if (it != c->objects.end()) return &it->second;
  auto s = c->stale.find(key);  // during a relist: the last state known
  return s != c->stale.end() ? &s->second : nullptr;
}

bool Cache::synced(Watched kind) const {
  const Collection* c = of(kind);
  return c != nullptr && c->synced;
}

bool Cache::synced() const { return pods_.synced && nads_.synced && claims_.synced; }

size_t Cache::size(Watched kind) const {
  const Collection* c = of(kind);
  return c == nullptr ? 0 : c->objects.size() + c->stale.size();
}

}  // namespace plumb::daemon
