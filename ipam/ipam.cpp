// make(): picks the IPAM by ipam.type; helpers shared by host-local and static.
#include "ipam/ipam.hpp"

#include <cstdint>

#include "ipam/cluster.hpp"
#include "ipam/delegated.hpp"
#include "ipam/host_local.hpp"

namespace plumb::ipam {

bool implemented(std::string_view type) {
  return type == "host-local" || type == "static" || type == "whereabouts" || type == "plumb-cluster";
}

Result<std::unique_ptr<Ipam>> make(const json::Value& ipam, const cni::PluginSearch* search, const ClusterAccess* cluster) {
  if (!ipam.IsObject()) {
    return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::quote(ipam));
  }
  auto type = PLUMB_TRY(json::get_string(ipam, "type", "ipam"));
  if (!type) return fail(cni_code::kInvalidConfig, "ipam.type is missing");
  if (*type == "host-local") return detail::make_host_local(ipam);
  if (*type == "static") return detail::make_static(ipam);
  if (*type == "whereabouts" || *type == "plumb-cluster") return detail::make_cluster(ipam, cluster);
  if (search != nullptr) return detail::make_delegated(*type, *search);
  return fail(cni_code::kInvalidConfig,
              "ipam.type \"" + *type + "\" is not supported (plumb implements host-local, static, whereabouts and plumb-cluster)");
}

namespace detail {

Result<std::vector<cni::RouteEntry>> parse_routes(const json::Value& obj, std::string_view where) {
  std::vector<cni::RouteEntry> out;
  const json::Value* arr = PLUMB_TRY(json::get_array(obj, "routes", where));
  if (arr == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < arr->Size(); ++i) {
    const json::Value& e = (*arr)[i];
    std::string at = std::string(where) + ".routes[" + std::to_string(i) + "]";
    if (!e.IsObject()) return fail(cni_code::kInvalidConfig, at + " must be an object, got " + json::quote(e));
    cni::RouteEntry r;
    auto dst = PLUMB_TRY(json::get_string(e, "dst", at));
    if (!dst) return fail(cni_code::kInvalidConfig, at + ".dst is missing");
    auto p = IpPrefix::parse(*dst);
    if (!p) return std::unexpected(p.error().within(at + ".dst"));
    r.dst = *p;
    auto gw = PLUMB_TRY(json::get_string(e, "gw", at));
    if (gw) {
      auto a = IpAddr::parse(*gw);
      if (!a) return std::unexpected(a.error().within(at + ".gw"));
      if (a->family != r.dst.addr.family) {
        return fail(cni_code::kInvalidConfig,
                    at + ".gw \"" + *gw + "\" is not of the same address family as dst \"" + *dst + "\"");
      }
      r.gw = *a;
    }
    struct IntField {
      const char* key;
      std::optional<int>* out;
    };
    for (IntField f : {IntField{"mtu", &r.mtu_bytes}, IntField{"advmss", &r.advmss}, IntField{"priority", &r.priority},
                       IntField{"table", &r.table}, IntField{"scope", &r.scope}}) {
      auto v = PLUMB_TRY(json::get_int(e, f.key, at));
      if (!v) continue;
      if (*v < 0 || *v > INT32_MAX) {
        return fail(cni_code::kInvalidConfig, at + "." + f.key + " out of range: " + std::to_string(*v));
      }
      *f.out = static_cast<int>(*v);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> cni_arg(const Request& req, std::string_view key) {
  for (const auto& [k, v] : req.cni_args) {
    if (k == key) return v;
  }
  return std::nullopt;
}

Result<std::vector<RequestedIpText>> requested_ip_texts(const Request& req) {
  std::vector<RequestedIpText> texts;
  texts.reserve(req.owner_ips.size() + 1);
  for (auto& s : req.owner_ips) texts.push_back({"IPAMClaim status.ips", s});
  if (auto ip = cni_arg(req, "IP")) {
    for (auto& s : split_list(*ip)) texts.push_back({"CNI_ARGS IP", s});
  }
  if (req.args != nullptr) {
    if (const json::Value* cni = PLUMB_TRY(json::get_object(*req.args, "cni", "args"))) {
      if (auto ips = PLUMB_TRY(json::get_string_array(*cni, "ips", "args.cni"))) {
        for (auto& s : *ips) texts.push_back({"args.cni.ips", s});
      }
    }
  }
  if (req.runtime_config != nullptr) {
    if (auto ips = PLUMB_TRY(json::get_string_array(*req.runtime_config, "ips", "runtimeConfig", true))) {
      for (auto& s : *ips) texts.push_back({"runtimeConfig.ips", s});
    }
  }
  return texts;
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string_view::npos) comma = s.size();
    std::string_view item = s.substr(pos, comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    pos = comma + 1;
  }
  return out;
}

Status validate_network_name(const std::string& name) {
  if (name.empty()) return fail(cni_code::kInvalidConfig, "network name is empty (it names the IPAM data directory)");
  if (name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name.size() > 255) {
    return fail(cni_code::kInvalidConfig,
                "network name \"" + name + "\" cannot name an IPAM data directory (no '/', not '.' or '..')");
  }
  return {};
}

}  // namespace detail
}  // namespace plumb::ipam
