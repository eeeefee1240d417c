// A delegated IPAM (delegated.hpp). The driver records the DEL (drivers/undo.hpp DelegateDel)
// before add() runs; del() here serves callers holding a Request (tests, GC tools).
#include "ipam/delegated.hpp"

namespace plumb::ipam::detail {
namespace {

class DelegatedIpam final : public Ipam {
 public:
  DelegatedIpam(std::string type, std::string binary, cni::PluginSearch search)
      : type_(std::move(type)), binary_(std::move(binary)), search_(std::move(search)) {}

  Result<cni::CniResult> add(const Request& req) override {
    auto out = PLUMB_TRY(exec(req, "ADD", nullptr, req.on_delegate_started));
    return cni::decode_plugin_result(type_, out, version(req));
  }

  Status del(const Request& req) override {
    PLUMB_TRY(exec(req, "DEL", nullptr, {}));
    return {};
  }

  Status check(const Request& req, const cni::CniResult& prev) override {
    if (cni::compare_versions(version(req), "0.4.0") < 0) return {};  // CHECK exists from 0.4.0 on
    PLUMB_TRY(exec(req, "CHECK", &prev, {}));
    return {};
  }

  std::string delegated_type() const override { return type_; }

 private:
  static std::string version(const Request& req) {
    const json::Value* v = req.network_config == nullptr ? nullptr : json::find(*req.network_config, "cniVersion");
    return v != nullptr && v->IsString() ? v->GetString() : "0.1.0";
  }

  Result<json::Document> exec(const Request& req, const char* command, const cni::CniResult* prev,
                              const std::function<Status(const process::Child&)>& started) const {
    if (req.network_config == nullptr) {
      return fail(cni_code::kInternal, "delegated IPAM " + type_ + ": no network config to delegate with");
    }
    json::Document sent = PLUMB_TRY(cni::with_prev_result(*req.network_config, prev, version(req)));
    cni::Invocation inv{command, req.container_id, req.netns, req.ifname, cni::delegate_args(req.cni_args)};
    auto out = cni::exec_plugin(type_, binary_, inv, json::dump(sent), search_, started);
    if (!out) return std::unexpected(out.error().within("ipam"));
    return std::move(*out);
  }

  std::string type_;
  std::string binary_;
  cni::PluginSearch search_;
};

}  // namespace

Result<std::unique_ptr<Ipam>> make_delegated(const std::string& type, const cni::PluginSearch& search) {
  auto binary = cni::find_plugin(type, search);
  if (!binary) return std::unexpected(binary.error().within("ipam.type"));
  return std::unique_ptr<Ipam>(std::make_unique<DelegatedIpam>(type, *binary, search));
}

}  // namespace plumb::ipam::detail
