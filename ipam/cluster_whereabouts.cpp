// whereabouts' keys around the cluster IPAM's allocation (cluster_internal.hpp): the flat-file
// configuration merged into a NAD's "ipam" object, and the static addresses ("addresses",
// CNI_ARGS IP= and GATEWAY=) added to every result, as whereabouts 0.9's pkg/config and
// cmd/whereabouts.go do.
#include <sys/stat.h>

#include <algorithm>

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "ipam/cluster_internal.hpp"
#include "ipam/host_local.hpp"

namespace plumb::ipam::cluster {
namespace {

/// A value mergo (whereabouts' merge) treats as unset in the NAD: null, "", false, 0, [], {}.
bool unset(const json::Value& v) {
  if (v.IsNull()) return true;
  if (v.IsString()) return v.GetStringLength() == 0;
  if (v.IsBool()) return !v.GetBool();
  if (v.IsNumber()) return v.GetDouble() == 0;
  if (v.IsArray()) return v.Empty();
  return v.IsObject() && v.MemberCount() == 0;
}

/// Fills what `dst` leaves unset from `src`, objects member by member (mergo.Merge).
void fill_unset(json::Value& dst, const json::Value& src, json::Document::AllocatorType& a) {
  for (auto it = src.MemberBegin(); it != src.MemberEnd(); ++it) {
    const std::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (key == "enable_overlapping_ranges") continue;  // whereabouts keeps the NAD's
    json::Value* mine = dst.HasMember(it->name) ? &dst[it->name] : nullptr;
    if (mine != nullptr && mine->IsObject() && it->value.IsObject()) {
      fill_unset(*mine, it->value, a);
    } else if (mine == nullptr || unset(*mine)) {
      json::set(dst, key, json::Value(it->value, a), a);
    }
  }
}

/// A CIDR with its address kept ("192.0.2.5/24"), as whereabouts' ParseCIDRSloppy reads it.
Result<IpPrefix> parse_cidr(const std::string& text, const std::string& where) {
  const std::string t(text::trim(text));
  if (t.find('/') == std::string::npos) return fail(cni_code::kInvalidConfig, where + " \"" + t + "\" is not a CIDR (address/prefix)");
  auto p = IpPrefix::parse(t);
  if (!p) return std::unexpected(p.error().within(where));
  return *p;
}

/// Is `ip` one of `statics` (address and prefix)?
bool is_static(const std::vector<cni::IpConfig>& statics, const cni::IpConfig& ip) {
  return std::any_of(statics.begin(), statics.end(), [&](const cni::IpConfig& s) { return s.address == ip.address; });
}

/// The cluster IPAM with whereabouts' static addresses: each result gets them after the pool's;
/// CHECK asks the pool only about the others.
class WithStatics final : public Ipam {
 public:
  WithStatics(std::unique_ptr<Ipam> pool, std::vector<cni::IpConfig> configured)
      : pool_(std::move(pool)), configured_(std::move(configured)) {}
  Result<cni::CniResult> add(const Request& req) override {
    auto statics = PLUMB_TRY(internal::static_addresses(req, configured_));
    cni::CniResult r = PLUMB_TRY(pool_->add(req));
    r.ips.insert(r.ips.end(), statics.begin(), statics.end());
    return r;
  }
  Status del(const Request& req) override { return pool_->del(req); }
  Status check(const Request& req, const cni::CniResult& prev) override {
    auto statics = PLUMB_TRY(internal::static_addresses(req, configured_));
    cni::CniResult pooled = prev;
    std::erase_if(pooled.ips, [&](const cni::IpConfig& ip) { return is_static(statics, ip); });
    return pool_->check(req, pooled);
  }
  bool supports_owner() const override { return pool_->supports_owner(); }
  Status gc(const Request& req, const KeepFn& keep) override { return pool_->gc(req, keep); }

 private:
  std::unique_ptr<Ipam> pool_;
  std::vector<cni::IpConfig> configured_;
};

}  // namespace

Result<json::Document> internal::with_flat_file(const json::Value& ipam, const std::vector<std::string>& defaults) {
  json::Document merged;
  merged.CopyFrom(ipam, merged.GetAllocator());
  if (!merged.IsObject()) return merged;  // parse_config names it
  std::vector<std::string> paths;
  if (auto own = PLUMB_TRY(json::get_string(ipam, "configuration_path", "ipam")); own && !own->empty()) paths.push_back(*own);
  paths.insert(paths.end(), defaults.begin(), defaults.end());
  for (const auto& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) continue;  // whereabouts' pathExists
    const std::string text = PLUMB_TRY(read_file(path, "whereabouts flat-file configuration"));
    auto flat = PLUMB_TRY(json::parse(text, "whereabouts flat-file configuration " + path));
    if (!flat.IsObject()) return fail(cni_code::kInvalidConfig, "whereabouts flat-file configuration " + path + " is not a JSON object");
    fill_unset(merged, flat, merged.GetAllocator());
    return merged;
  }
  return merged;
}

Result<std::vector<cni::IpConfig>> internal::parse_addresses(const json::Value& ipam) {
  std::vector<cni::IpConfig> out;
  const json::Value* list = PLUMB_TRY(json::get_array(ipam, "addresses", "ipam"));
  if (list == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    const std::string at = "ipam.addresses[" + std::to_string(i) + "]";
    const json::Value& e = (*list)[i];
    if (!e.IsObject()) return fail(cni_code::kInvalidConfig, at + " must be an object, got " + json::quote(e));
    auto addr = PLUMB_TRY(json::get_string(e, "address", at));
    if (!addr) return fail(cni_code::kInvalidConfig, at + ".address is missing");
    cni::IpConfig c{PLUMB_TRY(parse_cidr(*addr, at + ".address")), std::nullopt, std::nullopt};
    if (auto gw = PLUMB_TRY(json::get_string(e, "gateway", at)); gw && !gw->empty()) {
      auto g = IpAddr::parse(std::string(text::trim(*gw)));
      if (!g) return std::unexpected(g.error().within(at + ".gateway"));
      c.gateway = *g;
    }
    out.push_back(c);
  }
  return out;
}

Result<std::vector<cni::IpConfig>> internal::static_addresses(const Request& req, const std::vector<cni::IpConfig>& configured) {
  std::vector<cni::IpConfig> out = configured;
  if (auto ip = detail::cni_arg(req, "IP"); ip && !ip->empty()) {
    for (const auto& item : text::split(*ip, ',')) out.push_back({PLUMB_TRY(parse_cidr(std::string(item), "CNI_ARGS IP")), std::nullopt, std::nullopt});
  }
  if (auto gws = detail::cni_arg(req, "GATEWAY"); gws && !gws->empty()) {
    for (const auto& item : text::split(*gws, ',')) {
      auto gw = IpAddr::parse(std::string(text::trim(item)));
      if (!gw) return std::unexpected(gw.error().within("CNI_ARGS GATEWAY"));
      for (auto& s : out) {
        if (s.address.network().contains(*gw)) s.gateway = *gw;
      }
    }
  }
  return out;
}

std::unique_ptr<Ipam> internal::with_statics(std::unique_ptr<Ipam> pool, std::vector<cni::IpConfig> configured) {
  return std::make_unique<WithStatics>(std::move(pool), std::move(configured));
}

}  // namespace plumb::ipam::cluster
