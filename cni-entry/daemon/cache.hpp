// The daemon's side of the watched caches (cni-entry/source/watched.hpp): forks the cache
// process, applies the frames it sends to a map of the last state of every watched object,
// answers its workers' lookups from there, and tells PodEvents observers of the node's pods.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cni-entry/daemon/pod_events.hpp"
#include "cni-entry/source/watched.hpp"

namespace plumb::daemon {

class Cache {
 public:
  explicit Cache(source::WatchSetup setup) : setup_(std::move(setup)) {}
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  /// Forks the cache process (its descriptors: a stream socket to this daemon and stderr alone)
  /// unless one runs or one was forked less than a second ago. False when it cannot (stderr says why).
  bool start();
  /// The daemon's end of the cache process's socket to poll for POLLIN; -1 while none runs.
  [[nodiscard]] int fd() const { return fd_; }
  /// Reads what the cache process sent and applies every complete frame; at its end (it died),
  /// closes the socket: start() forks another, whose list replaces what this one held.
  void on_readable();
  /// SIGKILLs the cache process (the daemon stops); its pid is reaped by the daemon's wait loop.
  void stop();

  /// The object's JSON (see source::WatchedObjects::find), nullopt when not held or `server` is
  /// not the one watched.
  [[nodiscard]] const std::string* find(source::Watched kind, std::string_view server, const std::string& key) const;
  /// Every collection listed at least once (readiness).
  [[nodiscard]] bool synced() const;
  /// Whether collection `kind` was listed at least once.
  [[nodiscard]] bool synced(source::Watched kind) const;
  /// Objects held in collection `kind`.
  [[nodiscard]] size_t size(source::Watched kind) const;
  /// Adds an observer of the node's pods (not owned; it must outlive the Cache).
  void subscribe(PodEvents* observer) { observers_.push_back(observer); }
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Told of each list and watch the cache process made: the collection, "list" or "watch", its
  /// outcome (engine/k8s/reflector.hpp ReflectorSink::requested) and the seconds it took.
  std::function<void(source::Watched, std::string_view verb, std::string_view outcome, double seconds)> on_request;

 private:
  struct Collection {
    std::map<std::string, std::string> objects;  ///< "ns/name" -> JSON
    std::map<std::string, std::string> stale;    ///< during a relist: objects not listed again yet
    bool listing = false;
    bool synced = false;
  };
  Collection& of(source::Watched kind);
  [[nodiscard]] const Collection* of(source::Watched kind) const;
  void apply(source::WatchFrame f);
  void put(source::Watched kind, Collection& c, const std::string& key, std::string json);
  void remove(source::Watched kind, Collection& c, const std::string& key);

  source::WatchSetup setup_;
  int fd_ = -1;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point forked_{};
  std::string buffer_;
  Collection pods_, nads_, claims_;
  std::vector<PodEvents*> observers_;
};

}  // namespace plumb::daemon
