// static IPAM (reference: containernetworking/plugins plugins/ipam/static): fixed addresses,
// routes and DNS from the config, overridable per invocation. No state on disk.
//
// Per ADD, as the reference 1.1 does: the configured addresses, plus CNI_ARGS IP= (comma
// separated CIDRs); CNI_ARGS GATEWAY= (comma separated) becomes the gateway of every address
// whose subnet contains it; then args.cni.ips, if present, replaces the whole list, and
// runtimeConfig.ips (capability "ips"), if present, replaces it again. Every address is CIDR.
#include <optional>
#include <string>
#include <vector>

#include "ipam/host_local.hpp"

namespace plumb::ipam {
namespace {

struct StaticAddress {
  IpPrefix address;  // host bits kept: it is the interface address
  std::optional<IpAddr> gateway;
};

struct StaticConfig {
  std::vector<StaticAddress> addresses;
  std::vector<cni::RouteEntry> routes;
  cni::Dns dns;
};

Result<IpPrefix> parse_cidr(const std::string& text, const std::string& where) {
  auto p = IpPrefix::parse(text);
  if (!p) return std::unexpected(p.error().within(where + " must be in CIDR notation"));
  return *p;
}

Result<StaticConfig> parse_static_config(const json::Value& ipam) {
  if (!ipam.IsObject()) return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::quote(ipam));
  StaticConfig c;
  const json::Value* addrs = PLUMB_TRY(json::get_array(ipam, "addresses", "ipam"));
  if (addrs != nullptr) {
    for (rapidjson::SizeType i = 0; i < addrs->Size(); ++i) {
      const json::Value& e = (*addrs)[i];
      std::string at = "ipam.addresses[" + std::to_string(i) + "]";
      if (!e.IsObject()) return fail(cni_code::kInvalidConfig, at + " must be an object, got " + json::quote(e));
      auto text = PLUMB_TRY(json::get_string(e, "address", at));
      if (!text) return fail(cni_code::kInvalidConfig, at + ".address is missing");
      StaticAddress a;
      a.address = PLUMB_TRY(parse_cidr(*text, at + ".address"));
      auto gw = PLUMB_TRY(json::get_string(e, "gateway", at));
      if (gw) {
        auto g = IpAddr::parse(*gw);
        if (!g) return std::unexpected(g.error().within(at + ".gateway"));
        if (g->family != a.address.addr.family) {
          return fail(cni_code::kInvalidConfig,
                      at + ".gateway \"" + *gw + "\" is not of the same address family as address \"" + *text + "\"");
        }
        a.gateway = *g;
      }
      c.addresses.push_back(a);
    }
  }
  c.routes = PLUMB_TRY(detail::parse_routes(ipam, "ipam"));
  const json::Value* dns = PLUMB_TRY(json::get_object(ipam, "dns", "ipam"));
  if (dns != nullptr) {
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "nameservers", "ipam.dns"))) c.dns.nameservers = *v;
    if (auto v = PLUMB_TRY(json::get_string(*dns, "domain", "ipam.dns"))) c.dns.domain = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "search", "ipam.dns"))) c.dns.search = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "options", "ipam.dns"))) c.dns.options = *v;
  }
  return c;
}

class Static final : public Ipam {
 public:
  explicit Static(StaticConfig cfg) : cfg_(std::move(cfg)) {}

  Result<cni::CniResult> add(const Request& req) override {
    cni::CniResult r;
    for (const StaticAddress& a : PLUMB_TRY(addresses(req))) {
      r.ips.push_back(cni::IpConfig{a.address, a.gateway, std::nullopt});
    }
    r.routes = cfg_.routes;
    r.dns = cfg_.dns;
    return r;
  }

  Status del(const Request&) override { return {}; }

  Status check(const Request& req, const cni::CniResult& prev) override {
    for (const StaticAddress& a : PLUMB_TRY(addresses(req))) {
      bool found = false;
      for (const cni::IpConfig& ip : prev.ips) found = found || ip.address == a.address;
      if (!found) {
        return fail(cni_code::kNotFound, "static: address " + a.address.str() + " is missing from prevResult");
      }
    }
    return {};
  }

 private:
  /// The addresses of this invocation (see the file comment for the override order).
  Result<std::vector<StaticAddress>> addresses(const Request& req) const {
    std::vector<StaticAddress> out = cfg_.addresses;
    if (auto ip = detail::cni_arg(req, "IP")) {
      for (const std::string& s : detail::split_list(*ip)) {
        out.push_back(StaticAddress{PLUMB_TRY(parse_cidr(s, "static: CNI_ARGS IP \"" + s + "\"")), std::nullopt});
      }
    }
    if (auto gws = detail::cni_arg(req, "GATEWAY")) {
      for (const std::string& s : detail::split_list(*gws)) {
        auto g = IpAddr::parse(s);
        if (!g) return std::unexpected(g.error().within("static: CNI_ARGS GATEWAY"));
        for (StaticAddress& a : out) {
          if (a.address.contains(*g)) a.gateway = *g;
        }
      }
    }
    auto replace = [&](const json::Value& obj, std::string_view where, bool ci) -> Status {
      auto ips = PLUMB_TRY(json::get_string_array(obj, "ips", where, ci));
      if (!ips || ips->empty()) return {};
      out.clear();
      for (size_t i = 0; i < ips->size(); ++i) {
        std::string at = "static: " + std::string(where) + ".ips[" + std::to_string(i) + "]";
        out.push_back(StaticAddress{PLUMB_TRY(parse_cidr((*ips)[i], at)), std::nullopt});
      }
      return {};
    };
    if (req.args != nullptr) {
      const json::Value* cni = PLUMB_TRY(json::get_object(*req.args, "cni", "args"));
      if (cni != nullptr) PLUMB_TRY(replace(*cni, "args.cni", false));
    }
    if (req.runtime_config != nullptr) PLUMB_TRY(replace(*req.runtime_config, "runtimeConfig", true));
    return out;
  }

  StaticConfig cfg_;
};

}  // namespace

namespace detail {

Result<std::unique_ptr<Ipam>> make_static(const json::Value& ipam) {
  StaticConfig cfg = PLUMB_TRY(parse_static_config(ipam));
  return std::unique_ptr<Ipam>(std::make_unique<Static>(std::move(cfg)));
}

}  // namespace detail
}  // namespace plumb::ipam
