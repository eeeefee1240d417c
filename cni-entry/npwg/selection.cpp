// The selection annotation k8s.v1.cni.cncf.io/networks (spec 4.1): the comma-delimited format
// (4.1.1, plus Multus' "name@ifname") and the JSON list format with every key of 4.1.2.1.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "cni-entry/npwg/nad.hpp"

#include "engine/base/text.hpp"
#include "engine/kernel/ifname.hpp"

namespace plumb::nad {
namespace {

using json::Value;


// Appends rather than `"\"" + std::string(s)`: GCC 12 -O3 misreports that (-Wrestrict, PR105651).
std::string quote(std::string_view s) {
  std::string q(1, '"');
  q += s;
  q += '"';
  return q;
}

/// Builds errors that all start "k8s.v1.cni.cncf.io/networks: element N (name): ".
struct ElementContext {
  size_t index = 0;  // 1-based
  std::string name;

  [[nodiscard]] std::string prefix() const {
    std::string p = std::string(kNetworksAnnotation) + ": element " + std::to_string(index);
    if (!name.empty()) p += " (" + name + ")";
    return p + ": ";
  }
  [[nodiscard]] std::unexpected<Error> error(const std::string& what) const {
    return fail(cni_code::kInvalidAnnotation, prefix() + what);
  }
  /// `"key" <value> <problem>`.
  [[nodiscard]] std::unexpected<Error> bad(std::string_view key, const Value& v, const std::string& problem) const {
    std::string shown = v.IsString() ? quote({v.GetString(), v.GetStringLength()}) : json::quote(v);
    return error(quote(key) + " " + shown + " " + problem);
  }
};

/// Parses `n` colon-separated hex bytes ("aa:bb:..."); true on success.
bool parse_hex_bytes(std::string_view s, size_t n, std::string& normalized) {
  if (s.size() != n * 3 - 1) return false;
  normalized.clear();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && s[i * 3 - 1] != ':') return false;
    unsigned v = 0;
    const char* p = s.data() + i * 3;
    auto [ptr, ec] = std::from_chars(p, p + 2, v, 16);
    if (ec != std::errc{} || ptr != p + 2) return false;
    static const char* hex = "0123456789abcdef";
    if (i > 0) normalized += ':';
    normalized += hex[v >> 4];
    normalized += hex[v & 15];
  }
  return true;
}

Result<std::string> string_value(const ElementContext& ctx, std::string_view key, const Value& v) {
  if (!v.IsString()) return ctx.bad(key, v, "is not a string");
  return std::string(v.GetString(), v.GetStringLength());
}

Result<uint16_t> port_value(const ElementContext& ctx, std::string_view where, const Value& v) {
  if (!v.IsInt64() || v.GetInt64() < 1 || v.GetInt64() > 65535) {
    return ctx.bad(where, v, "is not an integer port in 1..65535");
  }
  return static_cast<uint16_t>(v.GetInt64());
}

Result<std::vector<PortMapping>> parse_port_mappings(const ElementContext& ctx, const Value& v) {
  if (!v.IsArray()) return ctx.bad("portMappings", v, "is not a list");
  if (v.Empty()) return ctx.bad("portMappings", v, "must contain at least one entry");
  std::vector<PortMapping> out;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const Value& e = v[i];
    const std::string where = "portMappings[" + std::to_string(i) + "]";
    if (!e.IsObject()) return ctx.bad(where, e, "is not a map");
    PortMapping pm;
    const Value* hp = json::find(e, "hostPort");
    const Value* cp = json::find(e, "containerPort");
    if (hp == nullptr) return ctx.bad(where, e, "has no \"hostPort\"");
    if (cp == nullptr) return ctx.bad(where, e, "has no \"containerPort\"");
    pm.host_port = PLUMB_TRY(port_value(ctx, where + ".hostPort", *hp));
    pm.container_port = PLUMB_TRY(port_value(ctx, where + ".containerPort", *cp));
    if (const Value* proto = json::find(e, "protocol")) {
      if (!proto->IsString()) return ctx.bad(where + ".protocol", *proto, "is not a string");
      std::string p(proto->GetString(), proto->GetStringLength());
      std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (p != "tcp" && p != "udp" && p != "sctp") return ctx.bad(where + ".protocol", *proto, "is not TCP, UDP or SCTP");
      pm.protocol = p;
    }
    if (const Value* hip = json::find(e, "hostIP")) {
      if (!hip->IsString()) return ctx.bad(where + ".hostIP", *hip, "is not a string");
      std::string s(hip->GetString(), hip->GetStringLength());
      if (!s.empty() && !IpAddr::parse(s)) return ctx.bad(where + ".hostIP", *hip, "is not an IP address");
      pm.host_ip = s;
    }
    out.push_back(std::move(pm));
  }
  return out;
}

Result<Bandwidth> parse_bandwidth(const ElementContext& ctx, const Value& v) {
  if (!v.IsObject()) return ctx.bad("bandwidth", v, "is not a map");
  if (v.MemberCount() == 0) return ctx.bad("bandwidth", v, "must contain at least one key");
  Bandwidth bw;
  bool has_ir = false, has_ib = false, has_er = false, has_eb = false;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string key(it->name.GetString(), it->name.GetStringLength());
    const std::string where = "bandwidth." + key;
    uint64_t* slot = nullptr;
    bool* seen = nullptr;
    if (key == "ingressRate") {
      slot = &bw.ingress_rate_bps;
      seen = &has_ir;
    } else if (key == "ingressBurst") {
      slot = &bw.ingress_burst_bits;
      seen = &has_ib;
    } else if (key == "egressRate") {
      slot = &bw.egress_rate_bps;
      seen = &has_er;
    } else if (key == "egressBurst") {
      slot = &bw.egress_burst_bits;
      seen = &has_eb;
    } else {
      return ctx.error("\"bandwidth\" key " + quote(key) + " is not one of ingressRate, ingressBurst, egressRate, egressBurst");
    }
    if (!it->value.IsUint64() || it->value.GetUint64() == 0) {
      return ctx.bad(where, it->value, "is not a non-zero integer");
    }
    *slot = it->value.GetUint64();
    *seen = true;
  }
  if (has_ib && !has_ir) return ctx.bad("bandwidth", v, "has \"ingressBurst\" without \"ingressRate\"");
  if (has_eb && !has_er) return ctx.bad("bandwidth", v, "has \"egressBurst\" without \"egressRate\"");
  return bw;
}

/// "ips": a non-empty list of addresses, each with an optional prefix length.
Result<std::vector<std::string>> parse_ips(const ElementContext& ctx, const Value& ips) {
  if (!ips.IsArray()) return ctx.bad("ips", ips, "is not a list of strings");
  if (ips.Empty()) return ctx.bad("ips", ips, "must contain at least one address");
  std::vector<std::string> out;
  for (const auto& ip : ips.GetArray()) {
    if (!ip.IsString()) return ctx.bad("ips", ip, "is not a string");
    std::string s(ip.GetString(), ip.GetStringLength());
    if (!IpPrefix::parse(s, /*allow_bare=*/true)) {
      return ctx.bad("ips", ip, "is not an IP address with an optional prefix length");
    }
    out.push_back(std::move(s));
  }
  return out;
}

/// The addresses of a "default-route" list (already known to be an array).
Result<std::vector<IpAddr>> parse_gateways(const ElementContext& ctx, const Value& dr) {
  std::vector<IpAddr> gws;
  for (const auto& g : dr.GetArray()) {
    if (!g.IsString()) return ctx.bad("default-route", g, "is not a string");
    auto a = IpAddr::parse({g.GetString(), g.GetStringLength()});
    if (!a) return ctx.bad("default-route", g, "is not an IP address");
    gws.push_back(*a);
  }
  return gws;
}

/// The keys 4.1.2.1 defines, and Multus's deviceID. Every other key without a period is reserved by the standard.
constexpr std::string_view kDefinedKeys[] = {"name",         "namespace", "ips",           "mac",
                                             "interface",    "cni-args",  "portMappings",  "bandwidth",
                                             "default-route", "infiniband-guid", "ipam-claim-reference",
                                             "deviceID"};  // the last: Multus's extension, kept without a period

/// Describes, in `warnings`, the keys of element `v` that are neither defined nor extensions.
void reserved_keys(const ElementContext& ctx, const Value& v, std::vector<std::string>* warnings) {
  if (warnings == nullptr) return;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (key.find('.') != std::string_view::npos) continue;
    if (std::find(std::begin(kDefinedKeys), std::end(kDefinedKeys), key) != std::end(kDefinedKeys)) continue;
    warnings->push_back(ctx.prefix() + "key " + quote(key) +
                        " is not defined by the standard; keys without a period are reserved (4.1.2.1), "
                        "extensions use reverse domain names");
  }
}

Result<SelectionElement> parse_json_element(const Value& v, size_t index, bool& seen_default_route,
                                            size_t& default_route_owner, std::vector<std::string>* warnings) {
  ElementContext ctx{index, {}};
  if (!v.IsObject()) return ctx.error("must be a map, got " + json::quote(v));
  SelectionElement el;

  const Value* name = json::find(v, "name");
  if (name == nullptr) return ctx.error("\"name\" is required");
  el.name = PLUMB_TRY(string_value(ctx, "name", *name));
  if (!is_dns1123_label(el.name)) return ctx.bad("name", *name, "is not a valid DNS-1123 label");
  ctx.name = el.name;

  if (const Value* ns = json::find(v, "namespace")) {
    el.namespace_ = PLUMB_TRY(string_value(ctx, "namespace", *ns));
    if (!el.namespace_.empty() && !is_dns1123_label(el.namespace_)) {
      return ctx.bad("namespace", *ns, "is not a valid DNS-1123 label");
    }
    if (!el.namespace_.empty()) ctx.name = el.namespace_ + "/" + el.name;
  }

  if (const Value* ips = json::find(v, "ips")) el.ips = PLUMB_TRY(parse_ips(ctx, *ips));

  if (const Value* mac = json::find(v, "mac")) {
    std::string s = PLUMB_TRY(string_value(ctx, "mac", *mac));
    auto m = Mac::parse(s);
    if (!m) return ctx.bad("mac", *mac, "is not a 6-byte MAC");
    el.mac = m->str();
  }

  if (const Value* itf = json::find(v, "interface")) {
    el.interface = PLUMB_TRY(string_value(ctx, "interface", *itf));
    if (!link::valid_ifname(el.interface)) {
      return ctx.bad("interface", *itf, "is not a valid interface name (" + std::string(link::kIfnameRule) + ")");
    }
  }

  if (const Value* args = json::find(v, "cni-args")) {
    if (!args->IsObject()) return ctx.bad("cni-args", *args, "is not a map");
    el.cni_args = json::clone(*args);
  }

  if (const Value* pm = json::find(v, "portMappings")) el.port_mappings = PLUMB_TRY(parse_port_mappings(ctx, *pm));

  if (const Value* bw = json::find(v, "bandwidth")) el.bandwidth = PLUMB_TRY(parse_bandwidth(ctx, *bw));

  // "default-route" may be an empty list: present-but-null counts as absent (json::find).
  if (const Value* dr = json::find(v, "default-route")) {
    if (!dr->IsArray()) return ctx.bad("default-route", *dr, "is not a list of strings");
    if (seen_default_route) {
      return ctx.error("\"default-route\" is set on more than one element (also on element " +
                       std::to_string(default_route_owner) + ")");
    }
    seen_default_route = true;
    default_route_owner = index;
    el.default_route = PLUMB_TRY(parse_gateways(ctx, *dr));
  }

  if (const Value* guid = json::find(v, "infiniband-guid")) {
    std::string s = PLUMB_TRY(string_value(ctx, "infiniband-guid", *guid));
    std::string norm;
    if (!parse_hex_bytes(s, 8, norm)) return ctx.bad("infiniband-guid", *guid, "is not an 8-byte InfiniBand GUID");
    el.infiniband_guid = norm;
  }

  if (const Value* claim = json::find(v, "ipam-claim-reference")) {
    el.ipam_claim_reference = PLUMB_TRY(string_value(ctx, "ipam-claim-reference", *claim));
    if (!is_dns1123_subdomain(el.ipam_claim_reference)) {
      return ctx.bad("ipam-claim-reference", *claim, "is not a valid IPAMClaim name (DNS-1123 subdomain)");
    }
    if (!el.ips.empty()) return ctx.error("\"ipam-claim-reference\" cannot be used together with \"ips\"");
  }
  if (const Value* dev = json::find(v, "deviceID")) el.device_id = PLUMB_TRY(string_value(ctx, "deviceID", *dev));
  reserved_keys(ctx, v, warnings);
  return el;
}

Result<std::vector<SelectionElement>> parse_json_list(std::string_view text, std::vector<std::string>* warnings) {
  auto doc = json::parse(text, "the JSON list format");
  if (!doc) return fail(cni_code::kInvalidAnnotation, std::string(kNetworksAnnotation) + ": " + doc.error().msg);
  if (!doc->IsArray()) {
    return fail(cni_code::kInvalidAnnotation, std::string(kNetworksAnnotation) + ": the JSON format must be a list of maps, got " +
                                                  json::quote(*doc));
  }
  std::vector<SelectionElement> out;
  bool seen_default_route = false;
  size_t owner = 0;
  for (rapidjson::SizeType i = 0; i < doc->Size(); ++i) {
    out.push_back(PLUMB_TRY(parse_json_element((*doc)[i], i + 1, seen_default_route, owner, warnings)));
  }
  return out;
}

/// One comma-format item: "name", "namespace/name", optionally followed by "@ifname".
Result<SelectionElement> parse_comma_item(std::string_view item, size_t index) {
  ElementContext ctx{index, {}};
  if (item.empty()) return ctx.error("is empty");
  SelectionElement el;
  std::string_view rest = item;
  auto slash = rest.find('/');
  if (slash != std::string_view::npos) {
    if (rest.find('/', slash + 1) != std::string_view::npos) return ctx.error(quote(item) + " has more than one '/'");
    el.namespace_ = std::string(text::trim(rest.substr(0, slash)));
    rest = rest.substr(slash + 1);
    if (el.namespace_.empty()) return ctx.error(quote(item) + " has an empty namespace before '/'");
    if (!is_dns1123_label(el.namespace_)) {
      return ctx.error("namespace " + quote(el.namespace_) + " is not a valid DNS-1123 label");
    }
  }
  auto at = rest.find('@');
  bool has_if = at != std::string_view::npos;
  if (has_if && rest.find('@', at + 1) != std::string_view::npos) return ctx.error(quote(item) + " has more than one '@'");
  el.name = std::string(text::trim(rest.substr(0, at)));
  if (el.name.empty()) return ctx.error(quote(item) + " has no network name");
  if (!is_dns1123_label(el.name)) return ctx.error("name " + quote(el.name) + " is not a valid DNS-1123 label");
  ctx.name = el.namespace_.empty() ? el.name : el.namespace_ + "/" + el.name;
  if (has_if) {
    el.interface = std::string(text::trim(rest.substr(at + 1)));
    if (!link::valid_ifname(el.interface)) {
      return ctx.error("interface " + quote(el.interface) + " is not a valid interface name (" + std::string(link::kIfnameRule) + ")");
    }
  }
  return el;
}

}  // namespace

Result<std::vector<SelectionElement>> parse_selection(std::string_view annotation, std::vector<std::string>* warnings) {
  std::string_view rest = text::trim(annotation);
  if (rest.empty()) return std::vector<SelectionElement>{};
  // Like Multus: anything with JSON punctuation is the JSON format.
  if (rest.find_first_of("[{\"") != std::string_view::npos) return parse_json_list(rest, warnings);
  std::vector<SelectionElement> out;
  size_t index = 1;
  while (true) {
    auto comma = rest.find(',');
    out.push_back(PLUMB_TRY(parse_comma_item(text::trim(rest.substr(0, comma)), index++)));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

}  // namespace plumb::nad
