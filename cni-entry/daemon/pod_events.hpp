// What `plumb daemon` tells of the pods of its node as its watch of them sees them (cache.hpp):
// the interface the node agent's features subscribe to (hot-plug of a changed selection
// annotation, the release of a deleted pod's cluster IPAM allocations). Called on the daemon's
// one thread, in its poll loop, in the order the watch delivered the changes: an observer must
// not block (hand slow work to a worker).
#pragma once

#include <string_view>

namespace plumb::daemon {

/// An observer of the node's pods (Cache::subscribe). Objects are the API server's Pod JSON.
class PodEvents {
 public:
  virtual ~PodEvents() = default;
  /// A pod of this node was added or changed. `old_json`: its state before ("" when the daemon
  /// had not seen it: a new pod, or every pod at the daemon's first list); `new_json`: now. A
  /// relist after a lost watch reports only the pods that changed meanwhile.
  virtual void pod_updated(std::string_view old_json, std::string_view new_json) = 0;
  /// A pod of this node was deleted from the API server (a DELETED event, or a relist no longer
  /// listing it); `last_json`: the last state the daemon saw.
  virtual void pod_deleted(std::string_view last_json) = 0;
};

}  // namespace plumb::daemon
