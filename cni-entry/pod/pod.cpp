// The orchestrator's entry: one CNI verb (pod.hpp), and what the verbs share (verbs.hpp).
#include "cni-entry/pod/pod.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cni-entry/pod/attach.hpp"
#include "cni-entry/pod/verbs.hpp"

namespace plumb::pod {

source::PodRef pod_ref(const cni::Env& env) {
  source::PodRef ref;
  ref.namespace_ = env.arg("K8S_POD_NAMESPACE").value_or("default");
  ref.name = env.arg("K8S_POD_NAME").value_or("");
  ref.uid = env.arg("K8S_POD_UID").value_or("");
  return ref;
}

bool is_system_namespace(const PlumbConfig& conf, const std::string& ns) {
  return std::find(conf.system_namespaces.begin(), conf.system_namespaces.end(), ns) != conf.system_namespaces.end();
}

Status await_readiness(const PlumbConfig& conf) {
  if (conf.readiness_indicator_file.empty()) return {};
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(conf.readiness_timeout_seconds * 1000.0));
  for (;;) {
    struct stat st {};
    if (::stat(conf.readiness_indicator_file.c_str(), &st) == 0) return {};
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fail(cni_code::kTryAgainLater, "the default network is not ready: readinessindicatorfile " + conf.readiness_indicator_file +
                                            " does not exist after " + std::to_string(static_cast<int>(conf.readiness_timeout_seconds)) +
                                            " s");
}

Result<std::string> encode_for_runtime(const json::Value& result_internal, const std::string& version) {
  auto r = PLUMB_TRY(cni::decode_result(result_internal, kInternalVersion));
  auto doc = PLUMB_TRY(cni::encode_result(r, version));
  return json::dump(doc);
}

namespace {

/// libcni's skel: CHECK exists from CNI 0.4.0, GC and STATUS from 1.1.0; older configs get
/// "incompatible CNI version" (code 1).
Status check_verb_version(const cni::Env& env, const PlumbConfig& conf) {
  struct Gate {
    cni::Command command;
    const char* verb;
    const char* since;
  };
  static constexpr Gate kGates[] = {{cni::Command::Check, "CHECK", "0.4.0"}, {cni::Command::Gc, "GC", "1.1.0"},
                                    {cni::Command::Status, "STATUS", "1.1.0"}};
  const Gate* gate = nullptr;
  for (const auto& g : kGates) {
    if (g.command == env.command) gate = &g;
  }
  if (gate == nullptr || cni::compare_versions(conf.cni_version, gate->since) >= 0) return {};
  const char* verb = gate->verb;
  const char* since = gate->since;
  return fail(cni_code::kIncompatibleVersion, std::string("config version \"") + conf.cni_version + "\" does not allow " + verb +
                                                  " (it exists from CNI " + since + " on)");
}

}  // namespace

Result<std::string> run(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  PLUMB_TRY(check_verb_version(env, conf));
  log.set_rotation(conf.log_rotation);
  switch (env.command) {
    case cni::Command::Add:
      return do_add(env, conf, log);
    case cni::Command::Del:
      return do_del(env, conf, log);
    case cni::Command::Check:
      return do_check(env, conf);
    case cni::Command::Gc:
      return do_gc(env, conf, log);
    case cni::Command::Status:
      return do_status(env, conf, log);
    case cni::Command::Version:
      return std::string(cni::encode_version_info(conf.cni_version));
  }
  return fail(cni_code::kInvalidEnv, "unknown CNI_COMMAND");
}

}  // namespace plumb::pod
