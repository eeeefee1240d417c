// Where pods' annotations and NetworkAttachmentDefinitions come from, and where network-status
// goes. One interface: the embedded local store now, the Kubernetes API server later.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/common/result.hpp"
#include "engine/nad/nad.hpp"

namespace plumb::source {

/// A pod reference: namespace and name (K8S_POD_NAMESPACE, K8S_POD_NAME).
struct PodRef {
  std::string namespace_;
  std::string name;
  std::string uid;  // K8S_POD_UID, "" if not given
};

class PodSource {
 public:
  virtual ~PodSource() = default;
  /// The pod's annotations; nullopt when the source has no such pod (not an error: a pod with
  /// no entry has no selection annotation). Errors: I/O or decode errors naming the file.
  [[nodiscard]] virtual Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const PodRef& pod) = 0;
  /// The NAD `namespace_/name`. Errors: kNotFound naming "namespace/name".
  [[nodiscard]] virtual Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string& namespace_,
                                                                                     const std::string& name) = 0;
  /// Publishes the pod's network-status annotation value (JSON text).
  [[nodiscard]] virtual Status write_network_status(const PodRef& pod, const std::string& status_json) = 0;
  /// Removes the published network-status (DEL). Absent is not an error.
  [[nodiscard]] virtual Status remove_network_status(const PodRef& pod) = 0;
};

/// The embedded default: a directory laid out as
///   <root>/nads/*.yaml|*.yml|*.json   NADs as `kubectl` takes them (several documents per file)
///   <root>/pods/<namespace>/<name>.yaml   a Pod manifest (only metadata.annotations is read)
///   <root>/status/<namespace>/<name>.json the network-status annotation plumb wrote (ADD), removed on DEL
/// Namespaces, names and the file names built from them are validated (DNS-1123) before any path
/// is formed.
[[nodiscard]] std::unique_ptr<PodSource> make_local_store(const std::string& root);

}  // namespace plumb::source
