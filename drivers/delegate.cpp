// The driver of every plugin type plumb does not implement: the plugin is delegated to (CNI SPEC
// execution protocol, engine/cni/delegate.hpp) in its place in the chain. prevResult flows in
// both directions between plumb's drivers and delegated plugins; DEL is the undo operation
// recorded before the plugin ran, with the exact config its ADD got. The process of each ADD and
// DEL is recorded while it runs, so the next teardown ends it if plumb is killed meanwhile.
//
// Native types are never delegated: parse_plugin() asks for this driver only when find() has no
// driver for the type.
#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"

namespace plumb::drivers {
namespace {

/// A delegated plugin: its type, executable, version and config as it goes on stdin.
struct DelegateConfig : Config {
  std::string type;
  std::string binary;   ///< found at parse (binDir, CNI_PATH): a missing binary fails before any change
  std::string version;  ///< the config's cniVersion (injected by the orchestrator)
  json::Document config;
};

Result<std::unique_ptr<Config>> delegate_parse(const json::Value& conf, const ParseInput& in) {
  auto c = std::make_unique<DelegateConfig>();
  c->type = PLUMB_TRY(json::get_string(conf, "type", in.network)).value_or("");
  auto binary = cni::find_plugin(c->type, in.plugin_search);
  if (!binary) return std::unexpected(binary.error().within("network " + in.network));
  c->binary = *binary;
  c->version = PLUMB_TRY(json::get_string(conf, "cniVersion", in.network)).value_or("0.1.0");
  c->config = json::clone(conf);
  c->config.RemoveMember("prevResult");
  return std::unique_ptr<Config>(std::move(c));
}

Result<cni::CniResult> delegate_add(Context& ctx, const Config& conf, const cni::CniResult* prev) {
  const auto& c = static_cast<const DelegateConfig&>(conf);
  const std::string args = cni::delegate_args(ctx.cni_args);
  json::Document sent = PLUMB_TRY(cni::with_prev_result(c.config, prev, c.version));
  // Write-ahead: a DEL with this exact config (the call's inverse), before the plugin can change
  // anything; its process recorded once started.
  return steps::call(ctx, steps::RunPlugin{c.type, c.binary,
                                           cni::Invocation{"ADD", ctx.container_id, ctx.netns_path, ctx.ifname, args},
                                           json::dump(sent), c.version,
                                           undo::DelegateDel{c.type, json::clone(c.config), ctx.ifname, args}});
}

Status delegate_check(Context& ctx, const Config& conf, const cni::CniResult& prev) {
  const auto& c = static_cast<const DelegateConfig&>(conf);
  // CHECK exists from CNI 0.4.0 on; libcni never sends it to older configs.
  if (cni::compare_versions(c.version, "0.4.0") < 0) return {};
  json::Document sent = PLUMB_TRY(cni::with_prev_result(c.config, &prev, c.version));
  cni::Invocation inv{"CHECK", ctx.container_id, ctx.netns_path, ctx.ifname, cni::delegate_args(ctx.cni_args)};
  PLUMB_TRY(cni::exec_plugin(c.type, c.binary, inv, json::dump(sent), ctx.plugin_search));
  return {};
}

}  // namespace

const Driver kDelegate = [] {
  Driver d;
  d.type = "(delegated)";
  d.parse = delegate_parse;
  d.add = delegate_add;
  d.check = delegate_check;
  return d;
}();

namespace undo {

Status run_op(Context& ctx, const DelegateDel& op) {
  const std::string where = "undo: DEL of delegated plugin " + op.type + " (" + op.ifname + ")";
  auto binary = cni::find_plugin(op.type, ctx.plugin_search);
  if (!binary) return std::unexpected(binary.error().within(where));
  const json::Value* v = json::find(op.config, "cniVersion");
  const std::string version = v != nullptr && v->IsString() ? v->GetString() : "0.1.0";
  // DEL gets the attachment's result as prevResult from CNI 0.4.0 on (libcni's cached result).
  std::optional<cni::CniResult> prev;
  if (ctx.attachment_result != nullptr && ctx.attachment_result->IsObject() && cni::compare_versions(version, "0.4.0") >= 0) {
    auto r = cni::decode_result(*ctx.attachment_result, "1.1.0");
    if (r) prev = std::move(*r);
  }
  auto sent = cni::with_prev_result(op.config, prev ? &*prev : nullptr, version);
  if (!sent) return std::unexpected(sent.error().within(where));
  cni::Invocation inv{"DEL", ctx.container_id, ctx.netns_path, op.ifname, op.args};
  // The DEL's process is recorded as the ADD's is (before it reads its config), as the record's
  // newest operation: a plumb killed while it runs leaves it to the next teardown, which ends it
  // first. Withdrawn once it has ended. A record that cannot take it does not hold the DEL up.
  bool recorded = false;
  auto started = [&](const process::Child& child) -> Status {
    recorded = ctx.journal != nullptr && will(ctx, DelegateEndProcess{child.pid, child.start_time}).has_value();
    return {};
  };
  auto out = cni::exec_plugin(op.type, *binary, inv, json::dump(*sent), ctx.plugin_search, started);
  if (recorded) (void)ctx.journal->retract();
  if (!out) return std::unexpected(out.error().within("undo"));
  return {};
}

Status run_op(Context&, const DelegateEndProcess& op) {
  auto st = process::end_orphan(process::Child{op.pid, op.start_time}, std::chrono::seconds(5));
  if (!st) return std::unexpected(st.error().within("undo: end delegated plugin process " + std::to_string(op.pid)));
  return {};
}

}  // namespace undo
}  // namespace plumb::drivers
