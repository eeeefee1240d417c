#include "engine/state/journal.hpp"

namespace plumb::txn {
namespace {
FaultHook g_fault_hook = nullptr;
unsigned g_steps = 0;
}  // namespace

void set_fault_hook(FaultHook hook) { g_fault_hook = hook; }

void fault_point() {
  ++g_steps;
  if (g_fault_hook != nullptr) g_fault_hook(g_steps);
}

Journal::Journal(const state::StateDir& dir, state::AttachmentRecord& rec) : dir_(dir), rec_(rec) {
  if (!rec_.undo.IsArray()) rec_.undo.SetArray();
}

void Journal::append(const json::Value& op, bool rollback_only) {
  auto& a = rec_.undo.GetAllocator();
  json::Value entry;
  entry.CopyFrom(op, a);
  if (rollback_only) json::set(entry, "rollbackOnly", json::Value(true), a);
  rec_.undo.PushBack(entry, a);
}

Status Journal::persist() {
  auto st = dir_.write(rec_);
  if (!st) return std::unexpected(st.error().within("record intent before change"));
  pending_ = false;
  fault_point();
  return {};
}

Status Journal::will(const json::Value& op, bool rollback_only) {
  append(op, rollback_only);
  auto st = persist();
  if (!st) rec_.undo.PopBack();  // not announced: the change is not made (a will_later() one stays pending)
  return st;
}

void Journal::will_later(const json::Value& op) {
  append(op, false);
  pending_ = true;
}

Status Journal::flush() { return pending_ ? persist() : Status{}; }

Status Journal::commit() {
  PLUMB_TRY(dir_.write(rec_));
  pending_ = false;
  return {};
}

Status Journal::retract() {
  if (!rec_.undo.Empty()) rec_.undo.PopBack();
  return commit();
}

bool skipped(const json::Value& entry, bool complete) {
  const json::Value* ro = complete ? json::find(entry, "rollbackOnly") : nullptr;
  return ro != nullptr && ro->IsBool() && ro->GetBool();
}

bool skippable_if_unknown(const json::Value& entry) {
  const json::Value* v = json::find(entry, "ifUnknown");
  return v != nullptr && v->IsString() && std::string_view(v->GetString(), v->GetStringLength()) == "skip";
}

Status unwind(const json::Value& undo, bool complete, const std::function<Status(const json::Value& op)>& exec, size_t from) {
  Status first;
  if (!undo.IsArray()) return first;
  for (size_t i = undo.Size(); i-- > from;) {
    const json::Value& op = undo[static_cast<rapidjson::SizeType>(i)];
    if (skipped(op, complete)) continue;
    auto st = exec(op);
    if (!st && first) first = std::unexpected(st.error());
  }
  return first;
}

}  // namespace plumb::txn
