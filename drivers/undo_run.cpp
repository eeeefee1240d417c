// The typed undo journal's one dispatch (drivers/undo.hpp): announcing an operation, running
// one, unwinding a record's list. The writer and reader are in undo.cpp.
#include "drivers/undo.hpp"

namespace plumb::drivers::undo {

Status will(Context& ctx, Op op, bool rollback_only) {
  if (ctx.journal == nullptr) return fail(cni_code::kInternal, "undo: no journal to record " + name_of(op) + " in");
  return ctx.journal->will(encode(op), rollback_only);
}

bool will_later(Context& ctx, Op op) {
  if (ctx.journal == nullptr) return false;
  ctx.journal->will_later(encode(op));
  return true;
}

Status run(Context& ctx, const Op& op) {
  return std::visit([&](const auto& o) { return run_op(ctx, o); }, op);
}

Status unwind(Context& ctx, const json::Value& undo, bool complete, const std::string& origin) {
  PLUMB_TRY(check(undo, origin));
  return txn::unwind(undo, complete, [&](const json::Value& v) -> Status { return run(ctx, PLUMB_TRY(decode(v, origin))); });
}

}  // namespace plumb::drivers::undo
