// The orchestrator: one pod's ADD/DEL/CHECK across the cluster-wide default network and every
// network its selection annotation picks, plus GC and STATUS for the node (NPWG v1.3 sections
// 4, 5, 6.2 and 7; CNI 1.1.0 verbs).
#pragma once

#include <string>

#include "engine/cni/cni.hpp"
#include "engine/base/result.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/log.hpp"

namespace plumb::pod {

/// Runs one CNI verb. Returns what goes to stdout on success ("" for DEL/GC/STATUS/CHECK,
/// the default network's result in conf.cni_version for ADD). Errors are CNI errors whose msg
/// names the attachment, field and value; a failed ADD has undone everything it did.
[[nodiscard]] Result<std::string> run(const cni::Env& env, const PlumbConfig& conf, Log& log);

}  // namespace plumb::pod
