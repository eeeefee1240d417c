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

namespace {

/// The operation's name when this binary does not know it (check() passed: only then does
/// decode() fail), else nullopt.
std::optional<std::string> unknown_name(const json::Value& v, const std::string& origin) {
  if (decode(v, origin)) return std::nullopt;
  return std::string(json::find(v, "op")->GetString());
}

/// Fills `kept` from `undo` and returns the index from which entries run: every entry up to the
/// newest unknown operation that may not be skipped is kept, and each later unknown one.
size_t keep_unknown(const json::Value& undo, bool complete, const std::string& origin, Kept& kept) {
  const auto& list = undo.GetArray();
  size_t from = 0;
  for (size_t i = 0; i < list.Size(); ++i) {
    const json::Value& v = list[static_cast<rapidjson::SizeType>(i)];
    if (!txn::skipped(v, complete) && unknown_name(v, origin) && !txn::skippable_if_unknown(v)) from = i + 1;
  }
  auto& a = kept.entries.GetAllocator();
  for (size_t i = 0; i < list.Size(); ++i) {
    const json::Value& v = list[static_cast<rapidjson::SizeType>(i)];
    auto unknown = txn::skipped(v, complete) ? std::nullopt : unknown_name(v, origin);
    if (i >= from && !unknown) continue;
    if (unknown) kept.unknown.push_back(*unknown);
    kept.entries.PushBack(json::Value(v, a), a);
  }
  return from;
}

}  // namespace

Status unwind(Context& ctx, const json::Value& undo, bool complete, const std::string& origin, Kept* kept) {
  PLUMB_TRY(check(undo, origin, kept != nullptr));
  const size_t from = kept != nullptr ? keep_unknown(undo, complete, origin, *kept) : 0;
  return txn::unwind(
      undo, complete,
      [&](const json::Value& v) -> Status {
        auto op = decode(v, origin);
        if (!op && op.error().cni_code == cni_code::kNewerRecord && kept != nullptr) return {};  // kept
        return run(ctx, PLUMB_TRY(std::move(op)));
      },
      from);
}

}  // namespace plumb::drivers::undo
