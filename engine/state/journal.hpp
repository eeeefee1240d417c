// The undo log of one attachment. Every change an ADD makes registers its inverse here *before*
// the change is made (write-ahead): the operation is appended to the attachment's state record
// and the record is rewritten atomically. A failed ADD unwinds the log in reverse; DEL unwinds the
// same log from the record alone; a DEL after a SIGKILLed ADD finds every change that may have
// happened. The journal owns the envelope of each entry (its place in the list, "rollbackOnly");
// the operation itself ({"op": "<name>", ...}) is typed, encoded, decoded and executed by the
// drivers layer (drivers/undo.hpp).
#pragma once

#include <functional>
#include <string>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/state/state.hpp"

namespace plumb::txn {

class Journal {
 public:
  /// rec.undo must be an array (it is created empty if not). The record is written on the first
  /// will() call and on commit().
  Journal(const state::StateDir& dir, state::AttachmentRecord& rec);

  /// Registers `op`, the inverse of a change about to be made, and persists the record.
  /// rollback_only: run only when undoing an ADD that did not complete (e.g. deleting a shared
  /// bridge this ADD created), never by a DEL of a completed attachment.
  /// Errors: the state write failed (ENOSPC, EROFS ...): the change must then not be made.
  [[nodiscard]] Status will(const json::Value& op, bool rollback_only = false);
  /// Registers `op` like will(), persisted by the next will() or flush() instead of now: the
  /// inverse of a change the caller makes only after that next intent's change (the IPAM's
  /// release, registered with the link its addresses go on: one record write announces both).
  void will_later(const json::Value& op);
  /// Persists the record when will_later() registered anything since it was last written (the
  /// caller's change follows). Errors: as will().
  [[nodiscard]] Status flush();
  /// Persists the record as it is now (e.g. after setting phase "ready" and the result).
  [[nodiscard]] Status commit();
  /// Withdraws the operation the last will() registered once its change can no longer happen
  /// (the process it ends has ended: a record retried by many DELs does not grow with each) and
  /// persists the record. Errors: as commit().
  [[nodiscard]] Status retract();

  state::AttachmentRecord& record() { return rec_; }

 private:
  const state::StateDir& dir_;
  state::AttachmentRecord& rec_;
  bool pending_ = false;  ///< will_later() registered something not yet written
  /// Appends `op` (with "rollbackOnly" when asked) to the record's undo list in memory.
  void append(const json::Value& op, bool rollback_only);
  /// Writes the record (an intent: the fault hook's step counts it). Errors: as will().
  [[nodiscard]] Status persist();
};

/// Called with a running count (1, 2, ...) each time an intent has been persisted, just before the
/// change it announces is made. Null in the plumb binary; the test build's plumb-faulty installs
/// one that SIGKILLs itself at a chosen step to prove a DEL after a crash removes everything.
using FaultHook = void (*)(unsigned step);
void set_fault_hook(FaultHook hook);
/// A step outside the intents where the hook may kill too (counted with them): DEL's batched
/// teardown calls it between its passes (cni-entry/pod/teardown_batch.cpp).
void fault_point();

/// Whether an undo entry is skipped when undoing an attachment: rollback-only and `complete`.
[[nodiscard]] bool skipped(const json::Value& entry, bool complete);

/// An undo entry's "ifUnknown": what a plumb that does not know its operation (one written by a
/// newer plumb) does. "skip": the operation does not have to run before the ones recorded
/// before it: they run, it stays recorded for a plumb that knows it. Absent (or any other
/// value): it does; it stays recorded together with every entry before it, and only the ones
/// after it run.
[[nodiscard]] bool skippable_if_unknown(const json::Value& entry);

/// Runs the undo operations of `undo` (an array) from its last down to index `from` through
/// `exec`. With `complete` (the ADD finished: phase "ready"), rollback-only operations are
/// skipped. Every operation is tried even when one fails; the first error is returned after
/// all were tried.
[[nodiscard]] Status unwind(const json::Value& undo, bool complete,
                            const std::function<Status(const json::Value& op)>& exec, size_t from = 0);

}  // namespace plumb::txn
