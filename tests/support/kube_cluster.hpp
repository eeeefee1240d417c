// A private node wired to the Kubernetes API test server (kube_api_server.hpp): plumb's config
// points at a kubeconfig with a rotating token file; pods and NADs are API objects; verbs are run
// with K8S_POD_UID. Used by the tests of the pod source, the cluster IPAM and IPAMClaims.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/kube_api_server.hpp"
#include "tests/support/pod_fixture.hpp"

namespace plumb::test {

/// `s` as a JSON string literal.
inline std::string json_quote(const std::string& s) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  return b.GetString();
}

/// A bridge network config on `bridge` with host-local over `subnet` in `ipam_dir`.
inline std::string bridge_net(const std::string& bridge, const std::string& subnet, const std::string& ipam_dir) {
  return R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": ")" + bridge +
         R"(", "capabilities": {"mac": true, "ips": true}, "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir +
         R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

class KubeCluster {
 public:
  /// `api_host`: the address the API test server listens on (an address of the node's namespace).
  explicit KubeCluster(Node& node, const std::string& api_host = "127.0.0.1") : fx(node), api(node.dir() + "/api", api_host) {
    token_file = node.dir() + "/token";
    write_file(token_file, "tok-1\n");
    api.set_tokens({"tok-1"});
    kubeconfig = node.dir() + "/kubeconfig";
    api.write_kubeconfig(kubeconfig, "tokenFile: " + token_file);
  }

  /// plumb's config on the API server (short timeouts so failure cases finish fast), with
  /// `extra` JSON members appended.
  std::string config(const std::string& extra = {}, const std::string& cni_version = "1.0.0") const {
    std::string e = R"("kubeconfig": ")" + kubeconfig + R"(", "apiTimeoutSeconds": 3, "apiRetries": 1)";
    if (!extra.empty()) e += ", " + extra;
    return fx.config(e, cni_version);
  }

  void add_nad(const std::string& ns, const std::string& name, const std::string& config_json) const {
    api.put("network-attachment-definitions", ns, name,
            R"({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": ")" +
                name + R"(", "namespace": ")" + ns + R"(", "uid": "nad-)" + name +
                R"(", "resourceVersion": "10"}, "spec": {"config": )" + json_quote(config_json) + "}}");
  }

  /// A pod object with `annotations` (key -> value).
  void add_pod(const std::string& ns, const std::string& name, const std::string& uid,
               const std::map<std::string, std::string>& annotations) const {
    std::string ann;
    for (auto& [k, v] : annotations) ann += (ann.empty() ? "" : ", ") + json_quote(k) + ": " + json_quote(v);
    api.put("pods", ns, name,
            R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ")" + name + R"(", "namespace": ")" + ns +
                R"(", "uid": ")" + uid + R"(", "resourceVersion": "100", "annotations": {)" + ann +
                R"(}}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Pending"}})");
  }

  /// The pod's network-status annotation as stored by the API server ("" if none).
  std::string network_status(const std::string& ns, const std::string& name) const {
    rapidjson::Document d;
    d.Parse(api.get("pods", ns, name).c_str());
    if (!d.IsObject() || !d.HasMember("metadata") || !d["metadata"].HasMember("annotations")) return {};
    auto& a = d["metadata"]["annotations"];
    if (!a.HasMember("k8s.v1.cni.cncf.io/network-status")) return {};
    return a["k8s.v1.cni.cncf.io/network-status"].GetString();
  }

  /// Runs a verb as a kubelet runtime would: K8S_POD_NAMESPACE/NAME/UID in CNI_ARGS. `binary`:
  /// what to execute in plumb's place (a wrapper running it on another node).
  Proc run(const std::string& command, const std::string& cid, const std::string& netns, const std::string& ns,
           const std::string& name, const std::string& uid, const std::string& conf,
           const std::map<std::string, std::string>& extra_env = {}, const std::string& binary = plumb_binary()) const {
    std::map<std::string, std::string> env = extra_env;
    env["CNI_ARGS"] = "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + name +
                      ";K8S_POD_INFRA_CONTAINER_ID=" + cid + (uid.empty() ? std::string() : ";K8S_POD_UID=" + uid);
    return fx.run_with(binary, env, command, cid, netns, ns, name, conf);
  }

  /// CNI GC with these (containerID, ifname) still valid.
  Proc gc(const std::string& conf_with_attachments) const {
    return plumb::test::run({plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}},
                            conf_with_attachments);
  }

  /// Files of attachment records left in the state directory.
  std::vector<std::string> records() const { return PodFixture::files_under(fx.state() + "/containers"); }

  PodFixture fx;
  KubeApiServer api;
  std::string token_file;
  std::string kubeconfig;
};

}  // namespace plumb::test
