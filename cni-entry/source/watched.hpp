// The API server's objects `plumb daemon` keeps watched (docs/thick-mode.md, "Watched caches"):
// the pods of its node (fieldSelector=spec.nodeName), the NADs and the IPAMClaims, each listed and
// watched by an engine/k8s Reflector on a thread of the daemon's cache process, which sends every
// change to the daemon as a frame on a stream socket. The daemon (cni-entry/daemon/cache.hpp)
// keeps the last state of each object; its workers ask it for the objects of an ADD
// (WatchedObjects, installed by the worker) and the API server source reads from there first: a
// hit makes no GET, a miss falls back to the GET, so the cache only ever makes an ADD faster.
//
// Why a process of its own: the daemon forks workers at any time, and a thread of the daemon
// (a reflector blocked in libcurl or OpenSSL) could hold a lock at the fork that the worker then
// waits for forever. The cache process is forked once, runs its threads, and never forks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/k8s/client.hpp"

namespace plumb::source {

/// The watched collections.
enum class Watched : char {
  kPod = 'p',    ///< the node's pods: /api/v1/pods?fieldSelector=spec.nodeName=<node>
  kNad = 'n',    ///< /apis/k8s.cni.cncf.io/v1/network-attachment-definitions
  kClaim = 'c',  ///< /apis/k8s.cni.cncf.io/v1alpha1/ipamclaims
};

/// What a worker asks of its daemon's cache: the object `ns/name` of collection `kind` as the
/// last list or watch event gave it (JSON text), nullopt when the cache does not hold it or
/// watches another API server than `server` ("https://host:port", Credentials::server).
class WatchedObjects {
 public:
  virtual ~WatchedObjects() = default;
  [[nodiscard]] virtual std::optional<std::string> find(Watched kind, const std::string& server, const std::string& ns,
                                                        const std::string& name) = 0;
};

/// Installs the cache the API server source reads first (a daemon worker's; nullptr: none, every
/// read is a GET, as thin mode).
void set_watched_objects(WatchedObjects* cache);
/// The installed cache, nullptr when none.
[[nodiscard]] WatchedObjects* watched_objects();

/// One change the cache process sends (frame layout in watched.cpp).
struct WatchFrame {
  enum class Op : char {
    kListed = 'L',   ///< a (re)list begins: objects of `kind` not put again before kSynced are gone
    kPut = 'P',      ///< `key` ("ns/name") is `json` now
    kDeleted = 'D',  ///< `key` was deleted (`json`: its last state)
    kSynced = 'S',   ///< the list of `kind` is complete
    kFailed = 'F',   ///< a list or watch of `kind` failed (`json`: the message); it is retried
    kRequest = 'R',  ///< a list or watch of `kind` was made: `key` "verb outcome", `json` the seconds it took
  };
  Op op = Op::kPut;
  Watched kind = Watched::kPod;
  std::string key;
  std::string json;
};

/// The bytes of one frame on the cache process's stream: u32 length (host order), op, kind,
/// key, NUL, json.
[[nodiscard]] std::string encode_frame(const WatchFrame& f);
/// Takes the first complete frame off `buffer` (nullopt: none complete yet). Errors: kDecode
/// for a frame that is not one (the stream is then unusable).
[[nodiscard]] Result<std::optional<WatchFrame>> take_frame(std::string& buffer);

/// What the cache process watches.
struct WatchSetup {
  k8s::Credentials creds;
  std::string node;  ///< the pods of this node (spec.nodeName)
  std::chrono::seconds watch_timeout{300};
};

/// The cache process's body: one reflector thread per collection, each change written to `fd`
/// as a frame. Returns only when writing to `fd` fails (the daemon is gone): the caller exits.
void run_watches(const WatchSetup& setup, int fd);

}  // namespace plumb::source
