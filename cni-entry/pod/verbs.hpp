// The CNI verbs of the orchestrator (internal to cni-entry/pod; pod.hpp's run() dispatches):
// add.cpp, del.cpp (DEL and CHECK), gc.cpp (GC and STATUS), and what they share.
#pragma once

#include <string>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "cni-entry/source/source.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/cni/cni.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod {

/// ADD (spec 7; CRI: a repeated ADD returns the recorded result). Returns the default network's
/// result in conf.cni_version. A failed ADD has undone everything it did (7.2).
[[nodiscard]] Result<std::string> do_add(const cni::Env& env, const PlumbConfig& conf, Log& log);
/// DEL from the state records alone; every attachment is tried. Returns "".
[[nodiscard]] Result<std::string> do_del(const cni::Env& env, const PlumbConfig& conf, Log& log);
/// CHECK: every recorded attachment against the kernel, and prevResult's addresses. Returns "".
[[nodiscard]] Result<std::string> do_check(const cni::Env& env, const PlumbConfig& conf);
/// GC (CNI 1.1.0): removes every attachment cni.dev/valid-attachments does not list. Returns "".
[[nodiscard]] Result<std::string> do_gc(const cni::Env& env, const PlumbConfig& conf, Log& log);
/// STATUS (CNI 1.1.0): 50/51 when an ADD could not succeed now: state directory, pod source,
/// readinessindicatorfile, the default network resolvable, and STATUS of its delegated plugins
/// (their own error and code). Returns "".
[[nodiscard]] Result<std::string> do_status(const cni::Env& env, const PlumbConfig& conf, Log& log);

/// Multus's readinessindicatorfile: returns once the file exists, polling every 100 ms for at
/// most readinessTimeoutSeconds (Multus: 45 s). Errors: kTryAgainLater naming the file.
[[nodiscard]] Status await_readiness(const PlumbConfig& conf);

/// Removes the pod's network-status when the attachments of `owner` (container ID, CNI_IFNAME)
/// wrote it (DEL, GC); not for pods in systemNamespaces. Failures are logged.
void remove_status(const PlumbConfig& conf, const source::PodRef& pod, const state::Key& owner, Log& log);

/// The pod of an invocation: K8S_POD_NAMESPACE (default "default"), K8S_POD_NAME, K8S_POD_UID.
[[nodiscard]] source::PodRef pod_ref(const cni::Env& env);
/// True when `ns` is one of conf.system_namespaces (no network-status for their pods).
[[nodiscard]] bool is_system_namespace(const PlumbConfig& conf, const std::string& ns);
/// A recorded result (internal shape) in the runtime's `version`, as JSON text.
[[nodiscard]] Result<std::string> encode_for_runtime(const json::Value& result_internal, const std::string& version);

}  // namespace plumb::pod
