// Running and undoing one attachment against the kernel: the sockets of one invocation, the
// drivers' context, the plugin chain with prevResult, the default-route element, and teardown
// from a state record (ADD rollback, DEL, GC).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/plan.hpp"
#include "drivers/driver.hpp"
#include "engine/base/netns.hpp"
#include "engine/kernel/netconf_watch.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/state/journal.hpp"
#include "engine/state/state.hpp"

namespace plumb::pod {

/// The result shape plumb keeps internally and in state records.
inline constexpr std::string_view kInternalVersion = "1.1.0";

/// Sockets and namespace handles of one invocation.
struct Kernel {
  /// The calling thread's rtnetlink socket in the node namespace (netlink::shared): a daemon
  /// worker's invocations all use one, rather than opening and closing one each.
  std::shared_ptr<netlink::Socket> node;
  /// What the thread remembers about the node namespace of `node` (remember_node_facts()); null
  /// in a process that serves one invocation.
  netconf::Watch* node_watch = nullptr;
  std::optional<netns::Netns> pod_ns;
  std::optional<netlink::Socket> pod;
  bool netns_is_node = false;  ///< the path named the node's own namespace: not opened as the pod's
};

/// Makes open_kernel() give every later invocation of the calling process a netconf::Watch of
/// its node namespace (one per thread and node socket, kept): for a process that serves one
/// invocation after another (a `plumb daemon` worker), where it spares an RTM_GETADDR dump and an
/// RTM_GETNETCONF per bridge ADD. A process that serves one invocation would only pay for it.
void remember_node_facts();

/// Refuses a `netns_path` that names the node's own network namespace (plumb's, or PID 1's: same
/// device and inode of the nsfs file), whatever the path. A path that cannot be opened passes
/// (open_kernel() reports it). Errors: kInvalidEnv naming CNI_NETNS and the path.
[[nodiscard]] Status refuse_node_netns(const std::string& netns_path);

/// Takes the node socket (netlink::shared: opened at a thread's first invocation, then kept) and,
/// when `netns_path` is given and exists, opens the pod namespace and its socket. A path naming
/// the node's own network namespace (plumb's, or PID 1's: same device and inode of the nsfs file)
/// is never a pod's: with `need_pod` it is refused, else it is treated as gone (netns_is_node).
/// Errors: kInvalidEnv naming CNI_NETNS when `need_pod` and it is missing, cannot be opened or is
/// the node's namespace; socket errors.
[[nodiscard]] Result<Kernel> open_kernel(const std::string& netns_path, bool need_pod);

/// The drivers' context for attachment (container, ifname, network) of this invocation.
[[nodiscard]] drivers::Context make_context(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const std::string& ifname,
                                            const std::string& network);

/// ADD of one attachment: its device-info file prepared, then its plugins run in order with
/// prevResult chaining. Every change is recorded in `journal` first. Returns the last plugin's
/// result (internal shape). Errors: the drivers' errors prefixed with att.where().
[[nodiscard]] Result<cni::CniResult> run_chain(const cni::Env& env, const PlumbConfig& conf, Kernel& k, Attachment& att,
                                               txn::Journal& journal);

/// Applies "default-route" (spec 4.1.2.1.9) of `chosen`: default routes leave every other
/// attachment's interface and go via the element's gateways on its interface; `results` (one per
/// attachment, same order as `atts`) are updated to match. Errors: route errors naming the gateway.
[[nodiscard]] Status apply_default_route(Kernel& k, const Attachment& chosen, std::vector<cni::CniResult>& results,
                                         const std::vector<Attachment>& atts);

/// Whether a teardown may record in `rec` (drivers::Context::journal: a delegated plugin's DEL
/// process while it runs): it is where StateDir::write() puts it (an older plumb's record, in
/// the legacy layout, is not rewritten elsewhere).
[[nodiscard]] bool recordable(const state::StateDir& state, const state::AttachmentRecord& rec);

/// Undoes one attachment from its record (ADD rollback: complete=false; DEL/GC: as recorded) and
/// removes the record once everything is gone; what an undo operation starts is recorded in
/// `rec` meanwhile (recordable()). Operations this plumb does not know (a newer
/// plumb's) stay: the record is rewritten with only what is left (drivers::undo::Kept), and
/// the returned text says so for the operator's log ("" when the record went). Errors: the
/// first failed undo operation, naming the record; the record is kept then so a later DEL
/// retries.
[[nodiscard]] Result<std::string> teardown(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state,
                                           state::AttachmentRecord& rec, bool complete);

/// Collects the errors of a verb that tries everything: the first one's code, every message;
/// and what it kept for a newer plumb, which is no error (notices for the log).
class Errors {
 public:
  void add(const Error& e);
  void add(const Status& st) {
    if (!st) add(st.error());
  }
  [[nodiscard]] bool empty() const { return !first_; }
  /// {} when nothing failed; else the first error with the others' text appended.
  [[nodiscard]] Status status() const;
  /// A record (or part of one) kept for a newer plumb: `notice` says which and why.
  void keep(std::string notice) { kept_.push_back(std::move(notice)); }
  [[nodiscard]] const std::vector<std::string>& kept() const { return kept_; }

 private:
  std::optional<Error> first_;
  std::string more_;
  std::vector<std::string> kept_;
};

/// Moves every record of `recs` whose undo list this binary cannot read whole (drivers::undo::
/// check) into recs.damaged.
void screen(state::Records& recs);

/// Ends the processes the usable records of `recs` hold (delegated plugins a killed plumb left
/// running), then tears down the usable records newest first (a record whose conflist said
/// "disableGC" stays when `keep_disable_gc`; the pod's devices in one RTM_DELLINK where
/// teardown_batched applies; operations of a newer plumb kept, see teardown()), then deals
/// with the damaged ones: each is moved to quarantine, except one of a format only a newer
/// plumb reads (kept whole for that plumb, a notice in errors.kept()). Every record is tried. Errors (all of them, in `errors`):
/// each failed teardown (its record kept for a retry) and each damaged record, by path and
/// where it went. Returns true when no record of the key is left.
bool teardown_all(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state, const state::Key& key,
                  state::Records& recs, bool keep_disable_gc, Errors& errors);

/// DEL of every record of a key (container ID, CNI_IFNAME) with the pod's devices deleted in one message
/// (cni-entry/pod/teardown_batch.cpp). The devices plumb creates inside the pod namespace are in
/// link::kPodLinkGroup; the kernel's device unregistration (an RCU synchronisation) is paid once
/// per RTM_DELLINK, so one message for the group instead of one per device saves it for every
/// attachment but one. Three passes, newest record first, every record kept until the last:
///   1. each record's undo operations except its link deletions (the order they always ran in;
///      the links are deleted last in each record anyway, and nothing else depends on them) and,
///      in a record that deletes its device, its bandwidth teardown;
///   2. one RTM_DELLINK of the group in the pod namespace (veth peers go with their pod ends);
///   3. each record's link deletions (already gone: success), the bandwidth teardowns left (the
///      shaped device, or its veth peer, went with the group and took plumb's filters and qdiscs
///      with it: only the map entries are left to delete), and the record's removal.
/// A DEL killed anywhere leaves every record whose links may remain, and every operation is
/// idempotent, so the next DEL finishes the job. Only used when every record is complete
/// ("ready": no rollback-only operation, which could depend on a link being gone), was made in
/// `netns_path`, and every device of the group there is one of the records' interfaces.
/// Returns the outcome of each record (as teardown() would give it, same order as `records`),
/// or nullopt when the batch does not apply (the caller tears down record by record).
[[nodiscard]] std::optional<std::vector<Status>> teardown_batched(const cni::Env& env, const PlumbConfig& conf, Kernel& k,
                                                                  const state::StateDir& state,
                                                                  std::vector<state::AttachmentRecord>& records);

}  // namespace plumb::pod
