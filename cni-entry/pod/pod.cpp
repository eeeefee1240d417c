// The orchestrator's entry: one CNI verb (pod.hpp), and what the verbs share (verbs.hpp).
#include "cni-entry/pod/pod.hpp"

#include <algorithm>

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

Result<std::string> encode_for_runtime(const json::Value& result_internal, const std::string& version) {
  auto r = PLUMB_TRY(cni::decode_result(result_internal, kInternalVersion));
  auto doc = PLUMB_TRY(cni::encode_result(r, version));
  return json::dump(doc);
}

Result<std::string> run(const cni::Env& env, const PlumbConfig& conf, Log& log) {
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
      return do_status(conf);
    case cni::Command::Version:
      return std::string(cni::encode_version_info(conf.cni_version));
  }
  return fail(cni_code::kInvalidEnv, "unknown CNI_COMMAND");
}

}  // namespace plumb::pod
