// Running drivers in-process as the orchestrator does: parse a plugin's JSON with its driver,
// then add / check with the typed config; undo operations decoded and run as DEL runs them.
#pragma once

#include "drivers/driver.hpp"
#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "engine/cni/cni.hpp"

namespace plumb::test {

/// parse (with ctx's network, ifname and CNI_ARGS, and plumb's `settings`) then add. Errors:
/// parse's or add's.
inline Result<cni::CniResult> add_plugin(drivers::Context& ctx, const json::Value& conf, const cni::CniResult* prev,
                                         const drivers::DriverSettings& settings = {}) {
  drivers::ParseInput in{ctx.network, ctx.ifname, ctx.cni_args, {}, {}, settings};
  auto p = PLUMB_TRY(drivers::parse_plugin(conf, in));
  return p.driver->add(ctx, *p.config, prev);
}

/// parse (with plumb's `settings`) then check.
inline Status check_plugin(drivers::Context& ctx, const json::Value& conf, const cni::CniResult& prev,
                           const drivers::DriverSettings& settings = {}) {
  drivers::ParseInput in{ctx.network, ctx.ifname, ctx.cni_args, {}, {}, settings};
  auto p = PLUMB_TRY(drivers::parse_plugin(conf, in));
  return p.driver->check(ctx, *p.config, prev);
}

/// One recorded undo operation, decoded and run.
inline Status run_undo(drivers::Context& ctx, const json::Value& op) {
  return drivers::undo::run(ctx, PLUMB_TRY(drivers::undo::decode(op, "test record")));
}

}  // namespace plumb::test
