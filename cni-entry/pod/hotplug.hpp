// Hot-plug (what multus-dynamic-networks-controller does): a running pod's selection annotation
// changed, so the attachments of its sandbox follow it. The sandbox is found in plumb's records
// (the key whose default attachment names the pod: its netns path and container ID); the pod is
// planned again as an ADD plans it; planned selection attachments no record has are attached,
// recorded attachments the plan no longer has are detached (detached first: a name may pass from
// one to the other); then network-status is written from every record. Everything happens under
// the key's lock with the records' write-ahead journal, as an ADD and a DEL: the new attachments
// are records of the same key, so a DEL of the sandbox removes them with the others, and a
// hot-plug killed at any step leaves records a DEL (or the next hot-plug: it first rolls back
// records that never completed) finishes. An attachment is identified by its NAD and interface
// name: give elements an "interface" (as multus-dynamic-networks-controller expects), or the
// positional netN names can shift when an element before them goes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"
#include "cni-entry/source/source.hpp"
#include "engine/base/result.hpp"

namespace plumb::pod::hotplug {

/// One attachment added or removed, or that failed to be.
struct Change {
  std::string network;         ///< the NAD, "namespace/name"
  std::string ifname;          ///< the pod-side interface
  bool added = false;          ///< added (true) or removed (false)
  std::optional<Error> error;  ///< set when it failed (an add rolled back, a removal kept for DEL)
};

/// What one hot-plug did; `sandbox` is "" when the pod has no sandbox plumb attached here.
struct Outcome {
  std::string sandbox;  ///< the key's "<containerID>:<CNI_IFNAME>"
  std::vector<Change> changes;
};

/// Brings the sandbox of `pod` in line with its current selection annotation (read from
/// `store`, as an ADD reads it). Errors: planning errors (a bad annotation or NAD: nothing is
/// changed), the lock and records' errors; each attachment's own failure is in its Change, the
/// others still done. network-status failures are logged.
[[nodiscard]] Result<Outcome> apply(const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod,
                                    Log& log);

}  // namespace plumb::pod::hotplug
