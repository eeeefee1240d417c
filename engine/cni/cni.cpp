// CNI wire types: environment, results 0.1.0 .. 1.1.0 and their conversion, error JSON and
// runtimeConfig key canonicalisation. Conversion follows libcni (pkg/types/020, 040, 100).
#include "engine/cni/cni.hpp"

#include <strings.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "engine/kernel/ifname.hpp"

namespace plumb::cni {
namespace {

using json::Value;
using Alloc = rapidjson::Document::AllocatorType;

/// Result shapes: which keys exist in which version.
enum class Shape { V02, V03, V04, V10, V11 };

std::optional<Shape> shape_of(std::string_view v) {
  if (v == "0.1.0" || v == "0.2.0") return Shape::V02;
  if (v == "0.3.0" || v == "0.3.1") return Shape::V03;
  if (v == "0.4.0") return Shape::V04;
  if (v == "1.0.0") return Shape::V10;
  if (v == "1.1.0") return Shape::V11;
  return std::nullopt;
}

Value str_value(std::string_view s, Alloc& a) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

void add(Value& obj, std::string_view key, Value v, Alloc& a) {
  obj.AddMember(str_value(key, a), std::move(v), a);
}

void add_str(Value& obj, std::string_view key, std::string_view s, Alloc& a) { add(obj, key, str_value(s, a), a); }

Value str_array(const std::vector<std::string>& v, Alloc& a) {
  Value arr(rapidjson::kArrayType);
  for (const auto& s : v) arr.PushBack(str_value(s, a), a);
  return arr;
}

// ---- decoding helpers: every error names "<where>.<key>" and the value ----

Result<std::optional<IpAddr>> get_ip(const Value& o, std::string_view key, const std::string& where) {
  auto s = PLUMB_TRY(json::get_string(o, key, where));
  if (!s || s->empty()) return std::optional<IpAddr>{};
  auto a = IpAddr::parse(*s);
  if (!a) return fail(cni_code::kDecode, where + "." + std::string(key) + " \"" + *s + "\": " + a.error().msg);
  return std::optional<IpAddr>(*a);
}

Result<IpPrefix> get_cidr(const Value& o, std::string_view key, const std::string& where) {
  auto s = PLUMB_TRY(json::get_string(o, key, where));
  if (!s) return fail(cni_code::kDecode, where + "." + std::string(key) + " is required");
  auto p = IpPrefix::parse(*s);
  if (!p) return fail(cni_code::kDecode, where + "." + std::string(key) + " \"" + *s + "\": " + p.error().msg);
  return *p;
}

Result<std::optional<int>> get_small_int(const Value& o, std::string_view key, const std::string& where) {
  auto v = PLUMB_TRY(json::get_int(o, key, where));
  if (!v) return std::optional<int>{};
  if (*v < INT32_MIN || *v > INT32_MAX) {
    return fail(cni_code::kDecode, where + "." + std::string(key) + " " + std::to_string(*v) + " is out of range");
  }
  return std::optional<int>(static_cast<int>(*v));
}

Result<Dns> decode_dns(const Value& top) {
  Dns d;
  const Value* dns = PLUMB_TRY(json::get_object(top, "dns", "result"));
  if (dns == nullptr) return d;
  d.nameservers = PLUMB_TRY(json::get_string_array(*dns, "nameservers", "result.dns")).value_or(std::vector<std::string>{});
  d.domain = PLUMB_TRY(json::get_string(*dns, "domain", "result.dns")).value_or("");
  d.search = PLUMB_TRY(json::get_string_array(*dns, "search", "result.dns")).value_or(std::vector<std::string>{});
  d.options = PLUMB_TRY(json::get_string_array(*dns, "options", "result.dns")).value_or(std::vector<std::string>{});
  return d;
}

Result<RouteEntry> decode_route(const Value& rv, const std::string& where, bool v11) {
  if (!rv.IsObject()) return fail(cni_code::kDecode, where + " must be an object, got " + json::quote(rv));
  RouteEntry r;
  r.dst = PLUMB_TRY(get_cidr(rv, "dst", where));
  r.gw = PLUMB_TRY(get_ip(rv, "gw", where));
  if (v11) {
    r.mtu_bytes = PLUMB_TRY(get_small_int(rv, "mtu", where));
    r.advmss = PLUMB_TRY(get_small_int(rv, "advmss", where));
    r.priority = PLUMB_TRY(get_small_int(rv, "priority", where));
    r.table = PLUMB_TRY(get_small_int(rv, "table", where));
    r.scope = PLUMB_TRY(get_small_int(rv, "scope", where));
  }
  return r;
}

Result<std::vector<RouteEntry>> decode_routes(const Value& obj, const std::string& where, bool v11) {
  std::vector<RouteEntry> out;
  const Value* arr = PLUMB_TRY(json::get_array(obj, "routes", where));
  if (arr == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < arr->Size(); ++i) {
    out.push_back(PLUMB_TRY(decode_route((*arr)[i], where + ".routes[" + std::to_string(i) + "]", v11)));
  }
  return out;
}

/// 0.1.0/0.2.0: {"ip4": {"ip","gateway","routes"}, "ip6": {...}, "dns"}.
Status decode_02(const Value& v, CniResult& r) {
  for (const char* fam : {"ip4", "ip6"}) {
    const std::string where = std::string("result.") + fam;
    const Value* ipc = PLUMB_TRY(json::get_object(v, fam, "result"));
    if (ipc == nullptr) continue;
    IpConfig c;
    c.address = PLUMB_TRY(get_cidr(*ipc, "ip", where));
    if (c.address.addr.is_v4() != (fam[2] == '4')) {
      return fail(cni_code::kDecode, where + ".ip \"" + c.address.str() + "\" is not an IPv" + (fam[2] == '4' ? "4" : "6") + " address");
    }
    c.gateway = PLUMB_TRY(get_ip(*ipc, "gateway", where));
    r.ips.push_back(c);
    auto routes = PLUMB_TRY(decode_routes(*ipc, where, false));
    r.routes.insert(r.routes.end(), routes.begin(), routes.end());
  }
  return {};
}

/// 0.3.0 and later: {"interfaces","ips","routes","dns"}.
Status decode_current(const Value& v, CniResult& r, Shape shape) {
  const bool v1x = shape == Shape::V10 || shape == Shape::V11;
  if (const Value* ifs = PLUMB_TRY(json::get_array(v, "interfaces", "result"))) {
    for (rapidjson::SizeType i = 0; i < ifs->Size(); ++i) {
      const std::string where = "result.interfaces[" + std::to_string(i) + "]";
      const Value& iv = (*ifs)[i];
      if (!iv.IsObject()) return fail(cni_code::kDecode, where + " must be an object, got " + json::quote(iv));
      Interface itf;
      itf.name = PLUMB_TRY(json::get_string(iv, "name", where)).value_or("");
      itf.mac = PLUMB_TRY(json::get_string(iv, "mac", where)).value_or("");
      itf.sandbox = PLUMB_TRY(json::get_string(iv, "sandbox", where)).value_or("");
      if (v1x) {
        auto mtu = PLUMB_TRY(json::get_uint(iv, "mtu", where));
        if (mtu) {
          if (*mtu > UINT32_MAX) return fail(cni_code::kDecode, where + ".mtu " + std::to_string(*mtu) + " is out of range");
          if (*mtu > 0) itf.mtu_bytes = static_cast<uint32_t>(*mtu);
        }
        itf.socket_path = PLUMB_TRY(json::get_string(iv, "socketPath", where)).value_or("");
        itf.pci_id = PLUMB_TRY(json::get_string(iv, "pciID", where)).value_or("");
      }
      r.interfaces.push_back(std::move(itf));
    }
  }
  if (const Value* ips = PLUMB_TRY(json::get_array(v, "ips", "result"))) {
    for (rapidjson::SizeType i = 0; i < ips->Size(); ++i) {
      const std::string where = "result.ips[" + std::to_string(i) + "]";
      const Value& iv = (*ips)[i];
      if (!iv.IsObject()) return fail(cni_code::kDecode, where + " must be an object, got " + json::quote(iv));
      IpConfig c;
      c.address = PLUMB_TRY(get_cidr(iv, "address", where));
      c.gateway = PLUMB_TRY(get_ip(iv, "gateway", where));
      c.interface = PLUMB_TRY(get_small_int(iv, "interface", where));
      // "version" is part of the 0.3.x shape (libcni also writes it in 0.4.0); when present it
      // must agree with the address.
      auto ver = PLUMB_TRY(json::get_string(iv, "version", where));
      if (ver) {
        if (*ver != "4" && *ver != "6") return fail(cni_code::kDecode, where + ".version \"" + *ver + "\" is not \"4\" or \"6\"");
        if ((*ver == "4") != c.address.addr.is_v4()) {
          return fail(cni_code::kDecode, where + ".version \"" + *ver + "\" does not match address " + c.address.str());
        }
      }
      r.ips.push_back(c);
    }
  }
  r.routes = PLUMB_TRY(decode_routes(v, "result", shape == Shape::V11));
  return {};
}

// ---- encoding helpers ----

Value encode_dns(const Dns& d, Alloc& a) {
  Value o(rapidjson::kObjectType);
  if (!d.nameservers.empty()) add(o, "nameservers", str_array(d.nameservers, a), a);
  if (!d.domain.empty()) add_str(o, "domain", d.domain, a);
  if (!d.search.empty()) add(o, "search", str_array(d.search, a), a);
  if (!d.options.empty()) add(o, "options", str_array(d.options, a), a);
  return o;
}

Value encode_route(const RouteEntry& r, bool v11, Alloc& a) {
  Value o(rapidjson::kObjectType);
  add_str(o, "dst", r.dst.str(), a);
  if (r.gw) add_str(o, "gw", r.gw->str(), a);
  if (v11) {
    // mtu/advmss/priority are omitted when zero (libcni omitempty ints), table/scope when unset.
    if (r.mtu_bytes && *r.mtu_bytes != 0) add(o, "mtu", Value(*r.mtu_bytes), a);
    if (r.advmss && *r.advmss != 0) add(o, "advmss", Value(*r.advmss), a);
    if (r.priority && *r.priority != 0) add(o, "priority", Value(*r.priority), a);
    if (r.table) add(o, "table", Value(*r.table), a);
    if (r.scope) add(o, "scope", Value(*r.scope), a);
  }
  return o;
}

void encode_02(const CniResult& r, json::Document& d) {
  Alloc& a = d.GetAllocator();
  const IpConfig* ip4 = nullptr;
  const IpConfig* ip6 = nullptr;
  for (const auto& c : r.ips) {
    if (c.address.addr.is_v4()) {
      if (ip4 == nullptr) ip4 = &c;
    } else if (ip6 == nullptr) {
      ip6 = &c;
    }
  }
  for (const IpConfig* c : {ip4, ip6}) {
    if (c == nullptr) continue;
    const bool v4 = c->address.addr.is_v4();
    Value o(rapidjson::kObjectType);
    add_str(o, "ip", c->address.str(), a);
    if (c->gateway) add_str(o, "gateway", c->gateway->str(), a);
    Value routes(rapidjson::kArrayType);
    for (const auto& rt : r.routes) {
      if (rt.dst.addr.is_v4() == v4) routes.PushBack(encode_route(rt, false, a), a);
    }
    if (!routes.Empty()) add(o, "routes", std::move(routes), a);
    add(d, v4 ? "ip4" : "ip6", std::move(o), a);
  }
  // libcni's 0.2.0 result always carries "dns".
  add(d, "dns", encode_dns(r.dns, a), a);
}

void encode_current(const CniResult& r, json::Document& d, Shape shape) {
  Alloc& a = d.GetAllocator();
  const bool v11 = shape == Shape::V11;
  if (!r.interfaces.empty()) {
    Value arr(rapidjson::kArrayType);
    for (const auto& itf : r.interfaces) {
      Value o(rapidjson::kObjectType);
      add_str(o, "name", itf.name, a);
      if (!itf.mac.empty()) add_str(o, "mac", itf.mac, a);
      if (v11 && itf.mtu_bytes && *itf.mtu_bytes != 0) add(o, "mtu", Value(*itf.mtu_bytes), a);
      if (!itf.sandbox.empty()) add_str(o, "sandbox", itf.sandbox, a);
      if (v11 && !itf.socket_path.empty()) add_str(o, "socketPath", itf.socket_path, a);
      if (v11 && !itf.pci_id.empty()) add_str(o, "pciID", itf.pci_id, a);
      arr.PushBack(std::move(o), a);
    }
    add(d, "interfaces", std::move(arr), a);
  }
  if (!r.ips.empty()) {
    Value arr(rapidjson::kArrayType);
    for (const auto& c : r.ips) {
      Value o(rapidjson::kObjectType);
      // libcni's types040.IPConfig (0.3.0, 0.3.1 and 0.4.0) carries "version"; 1.0.0 dropped it.
      if (shape == Shape::V03 || shape == Shape::V04) add_str(o, "version", c.address.addr.is_v4() ? "4" : "6", a);
      if (c.interface) add(o, "interface", Value(*c.interface), a);
      add_str(o, "address", c.address.str(), a);
      if (c.gateway) add_str(o, "gateway", c.gateway->str(), a);
      arr.PushBack(std::move(o), a);
    }
    add(d, "ips", std::move(arr), a);
  }
  if (!r.routes.empty()) {
    Value arr(rapidjson::kArrayType);
    for (const auto& rt : r.routes) arr.PushBack(encode_route(rt, v11, a), a);
    add(d, "routes", std::move(arr), a);
  }
  // "dns" is always written, "dns":{} when empty: what the reference plugins Debian ships
  // print (containernetworking-plugins 1.1.1 on libcni < 1.2, whose types write the empty struct).
  add(d, "dns", encode_dns(r.dns, a), a);
}

bool ieq(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

constexpr std::array<std::string_view, 19> kRuntimeKeys = {
    "portMappings", "bandwidth",     "ips",         "mac",          "infinibandGUID",
    "deviceID",     "dns",           "aliases",     "cgroupPath",   "CNIDeviceInfoFile",
    "io.kubernetes.cri.pod-annotations", "hostPort", "containerPort", "protocol", "hostIP",
    "ingressRate",  "ingressBurst",  "egressRate",  "egressBurst"};

/// Copies object `obj` with its keys canonicalised (values deep-copied); a later duplicate
/// replaces an earlier one.
Value rename_keys(const Value& obj, Alloc& a) {
  Value out(rapidjson::kObjectType);
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    std::string key = canonical_runtime_key({it->name.GetString(), it->name.GetStringLength()});
    Value v(it->value, a);
    if (key == "portMappings" && v.IsArray()) {
      for (auto& e : v.GetArray()) {
        if (e.IsObject()) e = rename_keys(e, a);
      }
    } else if (key == "bandwidth" && v.IsObject()) {
      v = rename_keys(v, a);
    }
    json::set(out, key, std::move(v), a);
  }
  return out;
}

bool valid_container_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxContainerIdBytes || id.front() == '.') return false;
  if (id.find("..") != std::string_view::npos) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

}  // namespace

bool is_valid_network_name(std::string_view name) {
  auto alnum = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (name.empty() || name.size() > 255 || !alnum(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

const std::vector<std::string>& supported_versions() {
  static const std::vector<std::string> v = {"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
  return v;
}

bool version_supported(std::string_view v) {
  const auto& all = supported_versions();
  return std::find(all.begin(), all.end(), v) != all.end();
}

int compare_versions(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& s) -> uint64_t {
    if (s.empty()) return 0;
    auto dot = s.find('.');
    std::string_view part = s.substr(0, dot);
    s = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc{} || ptr != part.data() + part.size()) return 0;
    return n;
  };
  while (!a.empty() || !b.empty()) {
    uint64_t x = next(a);
    uint64_t y = next(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

Result<Env> Env::from(const char* (*getenv_fn)(const char*)) {
  auto get = [&](const char* n) -> std::string {
    const char* v = getenv_fn(n);
    return v == nullptr ? std::string{} : std::string(v);
  };
  Env e;
  const std::string cmd = get("CNI_COMMAND");
  if (cmd.empty()) return fail(cni_code::kInvalidEnv, "CNI_COMMAND is not set");
  if (cmd == "ADD") {
    e.command = Command::Add;
  } else if (cmd == "DEL") {
    e.command = Command::Del;
  } else if (cmd == "CHECK") {
    e.command = Command::Check;
  } else if (cmd == "VERSION") {
    e.command = Command::Version;
  } else if (cmd == "STATUS") {
    e.command = Command::Status;
  } else if (cmd == "GC") {
    e.command = Command::Gc;
  } else {
    return fail(cni_code::kInvalidEnv, "CNI_COMMAND \"" + cmd + "\" is not one of ADD, DEL, CHECK, VERSION, STATUS, GC");
  }
  e.container_id = get("CNI_CONTAINERID");
  e.netns = get("CNI_NETNS");
  e.ifname = get("CNI_IFNAME");
  e.path = get("CNI_PATH");
  e.args_raw = get("CNI_ARGS");

  const bool add_or_check = e.command == Command::Add || e.command == Command::Check;
  const bool needs_attachment = add_or_check || e.command == Command::Del;
  if (needs_attachment && e.container_id.empty()) return fail(cni_code::kInvalidEnv, "CNI_CONTAINERID is not set");
  if (add_or_check && e.netns.empty()) return fail(cni_code::kInvalidEnv, "CNI_NETNS is not set");
  if (needs_attachment && e.ifname.empty()) return fail(cni_code::kInvalidEnv, "CNI_IFNAME is not set");
  if (!e.container_id.empty() && !valid_container_id(e.container_id)) {
    if (e.command == Command::Del) {
      e.container_id_refused = true;
    } else {
      return fail(cni_code::kInvalidEnv,
                  "CNI_CONTAINERID \"" + e.container_id.substr(0, 64) + (e.container_id.size() > 64 ? "...\"" : "\"") +
                      " is invalid: must be 1.." + std::to_string(kMaxContainerIdBytes) +
                      " of [A-Za-z0-9_.-], not start with '.' and not contain \"..\" (" +
                      std::to_string(e.container_id.size()) + " bytes given)");
    }
  }
  if (e.command != Command::Del && !e.ifname.empty() && !link::valid_ifname(e.ifname)) {
    return fail(cni_code::kInvalidEnv, "CNI_IFNAME \"" + e.ifname + "\" is not a valid interface name (" + std::string(link::kIfnameRule) + ")");
  }
  std::string_view rest = e.args_raw;
  while (!rest.empty()) {
    auto semi = rest.find(';');
    std::string_view item = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return fail(cni_code::kInvalidEnv, "CNI_ARGS item \"" + std::string(item) + "\" is not KEY=VALUE");
    }
    e.args.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return e;
}

std::optional<std::string> Env::arg(std::string_view key) const {
  for (const auto& [k, v] : args) {
    if (k == key) return v;
  }
  return std::nullopt;
}

Result<CniResult> decode_result(const json::Value& v, std::string_view version) {
  auto shape = shape_of(version);
  if (!shape) {
    return fail(cni_code::kIncompatibleVersion, "decode CNI result: unsupported cniVersion \"" + std::string(version) + "\"");
  }
  const std::string ctx = "decode CNI " + std::string(version) + " result";
  if (!v.IsObject()) return fail(cni_code::kDecode, ctx + ": result must be a JSON object, got " + json::quote(v));
  CniResult r;
  r.cni_version = std::string(version);
  Status st = *shape == Shape::V02 ? decode_02(v, r) : decode_current(v, r, *shape);
  if (st) {
    auto dns = decode_dns(v);
    if (dns) {
      r.dns = std::move(*dns);
    } else {
      st = std::unexpected(dns.error());
    }
  }
  if (!st) {
    Error e = st.error().within(ctx);
    e.cni_code = cni_code::kDecode;
    return std::unexpected(e);
  }
  return r;
}

Result<json::Document> encode_result(const CniResult& r, std::string_view version) {
  auto shape = shape_of(version);
  if (!shape) {
    return fail(cni_code::kIncompatibleVersion, "encode CNI result: unsupported cniVersion \"" + std::string(version) + "\"");
  }
  json::Document d;
  d.SetObject();
  add_str(d, "cniVersion", version, d.GetAllocator());
  if (*shape == Shape::V02) {
    encode_02(r, d);
  } else {
    encode_current(r, d, *shape);
  }
  return d;
}

std::string encode_error(const Error& e, std::string_view version) {
  json::Document d;
  d.SetObject();
  Alloc& a = d.GetAllocator();
  add_str(d, "cniVersion", version.empty() ? std::string_view(supported_versions().back()) : version, a);
  add(d, "code", Value(e.cni_code), a);
  Error shortened = e;
  shortened.details.clear();
  add_str(d, "msg", shortened.text(), a);
  if (!e.details.empty()) add_str(d, "details", e.details, a);
  return json::dump(d);
}

std::string encode_version_info(std::string_view version) {
  json::Document d;
  d.SetObject();
  Alloc& a = d.GetAllocator();
  add_str(d, "cniVersion", version, a);
  add(d, "supportedVersions", str_array(supported_versions(), a), a);
  return json::dump(d);
}

std::string canonical_runtime_key(std::string_view key) {
  for (std::string_view k : kRuntimeKeys) {
    if (ieq(k, key)) return std::string(k);
  }
  return std::string(key);
}

json::Document canonicalize_runtime_config(const json::Value& rc) {
  json::Document d;
  if (!rc.IsObject()) {
    d.CopyFrom(rc, d.GetAllocator());
    return d;
  }
  Value out = rename_keys(rc, d.GetAllocator());
  static_cast<Value&>(d) = std::move(out);
  return d;
}

}  // namespace plumb::cni
