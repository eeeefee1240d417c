// What `plumb daemon` does for the pods of its node besides serving CNI verbs (docs/hot-plug.md):
// the pod watch's updates and deletions become jobs — a hot-plug when a running pod's selection
// annotation changed (multus-dynamic-networks-controller), the release of a deleted pod's cluster
// IPAM addresses (whereabouts' ip-control-loop) — each run in a process of its own forked from
// the daemon, never in its poll loop (a job waits on the API server and on the pod's lock).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "cni-entry/daemon/pod_events.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "engine/base/json.hpp"

namespace plumb::daemon::pod_jobs {

/// One job for one pod.
struct Job {
  enum class Kind { Hotplug, ReleaseAddresses } kind = Kind::Hotplug;
  std::string ns;    ///< the pod's namespace
  std::string name;  ///< the pod's name
};

/// The job a watched pod's update asks for (`old_pod`, `new_pod`: Pod objects): a hot-plug when
/// its k8s.v1.cni.cncf.io/networks annotation changed (added, removed or rewritten), unless the
/// pod uses the node's network (spec.hostNetwork) or is being deleted; nullopt otherwise.
[[nodiscard]] std::optional<Job> on_update(const json::Value& old_pod, const json::Value& new_pod);

/// The job a watched pod's deletion asks for: the release of its addresses (host-network pods
/// have none).
[[nodiscard]] std::optional<Job> on_delete(const json::Value& pod);

/// Runs `job` with plumb's configuration `conf`: the hot-plug (pod/hotplug.hpp) or the release
/// (reconcile/pod_deleted.hpp); each attachment added or removed, each address released and each
/// failure is one line of `log` and one Kubernetes Event on the pod, posted through plumb's pod
/// source (multus-dynamic-networks-controller's reasons: AddedInterface, RemovedInterface,
/// FailedAddingInterface, FailedRemovingInterface; AddressReleased for a release), which
/// `on_event` (may be null) also gets (type "Normal" or "Warning", reason, message). Returns 0, or
/// 1 when anything failed.
using EventFn = void (*)(void* ctx, const Job& job, const std::string& type, const std::string& reason,
                         const std::string& message);
[[nodiscard]] int run(const Job& job, const pod::PlumbConfig& conf, pod::Log& log, EventFn on_event = nullptr,
                      void* ctx = nullptr);

/// Forks a process that runs `job` (run()) and exits with its status; the daemon reaps it as any
/// child. The process keeps its API clients (k8s::keep_clients): the job's reads, writes, cluster
/// IPAM requests and Events share one connection per credentials and options. Returns its pid, or
/// -1 when fork() failed (errno set).
[[nodiscard]] pid_t start(const Job& job, const pod::PlumbConfig& conf, pod::Log& log, EventFn on_event = nullptr,
                          void* ctx = nullptr);

/// plumb's configuration as the runtime hands it to plumb: the "plumb-shim" (or "plumb") plugin of
/// the conflist at `path` (what `plumb install` writes, 00-plumb.conflist), with the list's name
/// and cniVersion, as libcni gives them. Errors: the file's read and parse errors; kInvalidConfig
/// when it names neither plugin; parse_config's.
[[nodiscard]] Result<pod::PlumbConfig> node_config(const std::string& path);

/// The daemon's observer of its node's pods: starts the job each change asks for, with plumb's
/// configuration read from `conflist` (node_config) in the job's process. A pod seen for the first
/// time (a new pod, or every pod at the daemon's first list) asks for nothing: its ADD attaches
/// what it selects.
class Starter : public PodEvents {
 public:
  explicit Starter(std::string conflist) : conflist_(std::move(conflist)) {}
  void pod_updated(std::string_view old_json, std::string_view new_json) override;
  void pod_deleted(std::string_view last_json) override;

 private:
  void launch(const Job& job) const;
  std::string conflist_;
};

}  // namespace plumb::daemon::pod_jobs
