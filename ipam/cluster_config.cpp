// The cluster IPAM's configuration ("ipam" object, whereabouts' keys), the addresses a request
// asks for, and the etcd key layout (see cluster.hpp).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/base/text.hpp"
#include "ipam/cluster_internal.hpp"
#include "ipam/host_local.hpp"
#include "ipam/whereabouts.hpp"

namespace plumb::ipam::cluster {
namespace {

using internal::from_u128;
using internal::to_u128;

std::string plain_trim(std::string_view s) { return std::string(text::trim(s)); }

constexpr std::string_view kIpRoot = "/plumb/ipam/";
constexpr std::string_view kOwnerRoot = "/plumb/owners/";
constexpr std::string_view kCursorRoot = "/plumb/cursors/";

bool overlaps(const Pool& a, const Pool& b) {
  return a.start.family == b.start.family && a.start <= b.end && b.start <= a.end;
}

Result<IpAddr> parse_field_addr(const std::string& text, const std::string& field) {
  auto a = IpAddr::parse(plain_trim(text));
  if (!a) return std::unexpected(a.error().within(field));
  return *a;
}

/// One range entry: {range, range_start, range_end, exclude} of `obj`.
Result<Pool> parse_pool(const json::Value& obj, const std::string& where, const std::optional<IpAddr>& gateway) {
  if (!obj.IsObject()) return fail(cni_code::kInvalidConfig, where + " must be an object, got " + json::quote(obj));
  auto text = PLUMB_TRY(json::get_string(obj, "range", where));
  if (!text || plain_trim(*text).empty()) return fail(cni_code::kInvalidConfig, where + ".range is missing");
  const std::string field = where + ".range";
  std::string r = plain_trim(*text);
  Pool p;
  std::optional<IpAddr> start, end;
  if (auto dash = r.find('-'); dash != std::string::npos) {
    // "a.b.c.d-a.b.c.e/nn": the first and last address and the subnet.
    start = PLUMB_TRY(parse_field_addr(r.substr(0, dash), field));
    auto last = IpPrefix::parse(plain_trim(r.substr(dash + 1)));
    if (!last) return std::unexpected(last.error().within(field + " (start-end/prefix)"));
    end = last->addr;
    p.subnet = last->network();
  } else {
    auto pre = IpPrefix::parse(r);
    if (!pre) return std::unexpected(pre.error().within(field));
    p.subnet = pre->network();  // whereabouts accepts host bits and uses the network
  }
  if (p.subnet.len >= p.subnet.max_len()) {
    return fail(cni_code::kInvalidConfig, field + " \"" + r + "\" has no address to hand out");
  }
  const bool v4 = p.subnet.addr.is_v4();
  for (auto [key, out] : {std::pair{"range_start", &start}, std::pair{"range_end", &end}}) {
    auto s = PLUMB_TRY(json::get_string(obj, key, where));
    if (s && !plain_trim(*s).empty()) *out = PLUMB_TRY(parse_field_addr(*s, where + "." + key));
  }
  p.start = start ? *start : p.subnet.addr.plus(1);
  if (end) {
    p.end = *end;
  } else {
    p.end = p.subnet.last();
    if (v4) p.end = from_u128(AF_INET, to_u128(p.end) - 1);  // not the broadcast address
  }
  for (auto [what, a] : {std::pair{"start", &p.start}, std::pair{"end", &p.end}}) {
    if (a->family != p.subnet.addr.family || !p.subnet.contains(*a)) {
      return fail(cni_code::kInvalidConfig, where + ": range " + what + " " + a->str() + " is not in subnet " + p.subnet.str());
    }
  }
  if (p.end < p.start) {
    return fail(cni_code::kInvalidConfig, where + ": range start " + p.start.str() + " is after range end " + p.end.str());
  }
  auto excl = PLUMB_TRY(json::get_string_array(obj, "exclude", where));
  if (excl) {
    for (size_t i = 0; i < excl->size(); ++i) {
      std::string at = where + ".exclude[" + std::to_string(i) + "]";
      auto e = IpPrefix::parse(plain_trim((*excl)[i]), true);
      if (!e) return std::unexpected(e.error().within(at));
      if (e->addr.family != p.subnet.addr.family) {
        return fail(cni_code::kInvalidConfig, at + " \"" + (*excl)[i] + "\" is not of the address family of " + p.subnet.str());
      }
      p.exclude.push_back(e->network());
    }
  }
  if (gateway && gateway->family == p.subnet.addr.family && p.subnet.contains(*gateway)) p.gateway = gateway;
  return p;
}

/// Endpoint list of a string ("a:2379, https://b:2379") or an array of strings.
Status add_endpoints(const json::Value& ipam, const char* key, std::vector<std::string>& out) {
  const json::Value* v = json::find(ipam, key);
  if (v == nullptr) return {};
  std::vector<std::string> items;
  if (v->IsString()) {
    items = detail::split_list(v->GetString());
  } else if (v->IsArray()) {
    // v is an array here: read its strings directly (an optional<vector> round trip trips
    // GCC 12's -Wmaybe-uninitialized at -O2).
    for (auto& e : v->GetArray()) {
      if (!e.IsString()) {
        return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " must be an array of strings, got " + json::quote(*v));
      }
      for (auto& x : detail::split_list(e.GetString())) items.push_back(x);
    }
  } else {
    return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " must be a string or an array of strings, got " + json::quote(*v));
  }
  out.insert(out.end(), items.begin(), items.end());
  return {};
}

/// The Kubernetes datastore's keys (whereabouts'): which datastore, overlapping ranges, node
/// slices, and the keys accepted as no-ops.
Status parse_datastore(const json::Value& ipam, Config& c) {
  auto store = PLUMB_TRY(json::get_string(ipam, "datastore", "ipam"));
  if (store && *store != "kubernetes" && *store != "etcd") {
    return fail(cni_code::kInvalidConfig, "ipam.datastore \"" + *store + "\" must be \"kubernetes\" or \"etcd\"");
  }
  if (store && *store == "etcd" && c.etcd.endpoints.empty()) {
    return fail(cni_code::kInvalidConfig, "ipam.datastore is \"etcd\" but ipam.etcd_host (or ipam.etcd_endpoints) is missing");
  }
  // whereabouts' default datastore is Kubernetes; etcd when its endpoints are given.
  c.datastore = (store && *store == "kubernetes") || c.etcd.endpoints.empty() ? Datastore::Kubernetes : Datastore::Etcd;
  c.overlapping_ranges = PLUMB_TRY(json::get_bool(ipam, "enable_overlapping_ranges", "ipam")).value_or(true);
  if (const json::Value* k = PLUMB_TRY(json::get_object(ipam, "kubernetes", "ipam")); k != nullptr) {
    c.kubeconfig = PLUMB_TRY(json::get_string(*k, "kubeconfig", "ipam.kubernetes")).value_or("");
  }
  for (const char* key : {"leader_lease_duration", "leader_renew_deadline", "leader_retry_period", "sleep_for_race"}) {
    PLUMB_TRY(json::get_int(ipam, key, "ipam"));  // accepted: plumb needs no leader election
  }
  auto slice = PLUMB_TRY(json::get_string(ipam, "node_slice_size", "ipam"));
  if (!slice || slice->empty()) return {};
  if (c.datastore != Datastore::Kubernetes) {
    return fail(cni_code::kInvalidConfig, "ipam.node_slice_size \"" + *slice + "\" needs the Kubernetes datastore (no etcd keys)");
  }
  if (c.pools.size() != 1) {
    return fail(cni_code::kInvalidConfig, "ipam.node_slice_size \"" + *slice + "\" takes exactly one range (got " +
                                              std::to_string(c.pools.size()) + ", as whereabouts' node slices)");
  }
  c.node_slice_size = *slice;
  c.node_slice_len = PLUMB_TRY(whereabouts::parse_slice_size(*slice, c.pools[0].subnet));
  PLUMB_TRY(whereabouts::divide(c.pools[0].subnet, *c.node_slice_len));
  return {};
}

}  // namespace

Result<std::vector<std::optional<IpAddr>>> internal::requested(const Request& req, const Config& cfg) {
  const auto texts = PLUMB_TRY(detail::requested_ip_texts(req));
  std::vector<std::optional<IpAddr>> want(cfg.pools.size());
  for (auto& [src, text] : texts) {
    if (src == "CNI_ARGS IP") continue;  // whereabouts: a static address (static_addresses)
    auto p = IpPrefix::parse(text, true);
    if (!p) return std::unexpected(p.error().within(cfg.type + ": requested IP in " + src));
    const IpAddr& ip = p->addr;
    std::optional<size_t> idx;
    for (size_t i = 0; i < cfg.pools.size() && !idx; ++i) {
      if (cfg.pools[i].contains(ip)) idx = i;
    }
    if (!idx) {
      std::string all;
      for (auto& pool : cfg.pools) all += (all.empty() ? "" : ", ") + pool.str();
      return fail(cni_code::kIpamExhausted, cfg.type + ": requested IP " + ip.str() + " is not inside any range of pool \"" +
                                                cfg.pool_name + "\" (" + all + ")");
    }
    if (want[*idx] && *want[*idx] == ip) continue;
    if (want[*idx]) {
      return fail(cni_code::kIpamExhausted, cfg.type + ": requested IPs " + want[*idx]->str() + " and " + ip.str() +
                                                " are both in range " + cfg.pools[*idx].str() + "; one address per range");
    }
    if (!cfg.pools[*idx].allocatable(ip)) {
      return fail(cni_code::kIpamExhausted, cfg.type + ": requested IP " + ip.str() + " is excluded from range " +
                                                cfg.pools[*idx].str() + " (gateway, exclude, network or broadcast address)");
    }
    want[*idx] = ip;
  }
  return want;
}

std::string internal::pod_ref_of(const Request& req) {
  auto name = detail::cni_arg(req, "K8S_POD_NAME");
  if (!name || name->empty()) return {};
  return detail::cni_arg(req, "K8S_POD_NAMESPACE").value_or("default") + "/" + *name;
}

namespace {

Status check_ids(const Request& req, const std::string& type, bool need_ifname) {
  if (req.container_id.empty()) return fail(cni_code::kInvalidEnv, type + ": CNI_CONTAINERID is empty");
  if (req.container_id.find('\0') != std::string::npos) {
    return fail(cni_code::kInvalidEnv, type + ": CNI_CONTAINERID contains a NUL byte");
  }
  if (need_ifname && req.ifname.empty()) return fail(cni_code::kInvalidEnv, type + ": CNI_IFNAME is empty");
  if (req.ifname.find('/') != std::string::npos || req.ifname.find('\0') != std::string::npos) {
    return fail(cni_code::kInvalidEnv, type + ": CNI_IFNAME \"" + req.ifname + "\" is not an interface name");
  }
  return {};
}

}  // namespace

Result<std::pair<std::string, std::string>> internal::identity(const Request& req, const std::string& type, bool need_ifname) {
  const std::string& owner = req.owner;
  if (!owner.empty()) {
    if (owner.find('\0') != std::string::npos) return fail(cni_code::kInvalidConfig, type + ": allocation owner contains a NUL byte");
    return std::pair{owner, std::string(kClaimIfname)};
  }
  PLUMB_TRY(check_ids(req, type, need_ifname));
  return std::pair{req.container_id, req.ifname};
}

bool Pool::allocatable(const IpAddr& a) const {
  if (!contains(a)) return false;
  if (gateway && a == *gateway) return false;
  if (a.is_v4() && (a == subnet.addr || a == subnet.last())) return false;
  return std::none_of(exclude.begin(), exclude.end(), [&](const IpPrefix& e) { return e.contains(a); });
}

std::string Pool::str() const { return subnet.str() + " (" + start.str() + "-" + end.str() + ")"; }

Result<Config> parse_config(const json::Value& ipam) {
  if (!ipam.IsObject()) return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::quote(ipam));
  Config c;
  c.type = PLUMB_TRY(json::get_string(ipam, "type", "ipam")).value_or("whereabouts");
  if (auto gw = PLUMB_TRY(json::get_string(ipam, "gateway", "ipam")); gw && !plain_trim(*gw).empty()) {
    c.gateway = PLUMB_TRY(parse_field_addr(*gw, "ipam.gateway"));
  }
  if (json::find(ipam, "range") != nullptr) {
    c.pools.push_back(PLUMB_TRY(parse_pool(ipam, "ipam", c.gateway)));
  } else {
    for (const char* key : {"range_start", "range_end", "exclude"}) {
      if (json::find(ipam, key) != nullptr) {
        return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " is set without ipam.range");
      }
    }
  }
  if (const json::Value* ranges = PLUMB_TRY(json::get_array(ipam, "ipRanges", "ipam")); ranges != nullptr) {
    for (rapidjson::SizeType i = 0; i < ranges->Size(); ++i) {
      c.pools.push_back(PLUMB_TRY(parse_pool((*ranges)[i], "ipam.ipRanges[" + std::to_string(i) + "]", c.gateway)));
    }
  }
  if (c.pools.empty()) return fail(cni_code::kInvalidConfig, "ipam has no range: set ipam.range or ipam.ipRanges");
  for (size_t i = 0; i < c.pools.size(); ++i) {
    for (size_t j = i + 1; j < c.pools.size(); ++j) {
      if (overlaps(c.pools[i], c.pools[j])) {
        return fail(cni_code::kInvalidConfig, "ipam ranges " + c.pools[i].str() + " and " + c.pools[j].str() +
                                                  " overlap (entries " + std::to_string(i) + " and " + std::to_string(j) +
                                                  ", \"range\" first)");
      }
    }
  }
  if (auto name = PLUMB_TRY(json::get_string(ipam, "network_name", "ipam")); name && !name->empty()) {
    if (*name == "." || *name == ".." || name->find('/') != std::string::npos || name->find('\0') != std::string::npos ||
        name->size() > 253) {
      return fail(cni_code::kInvalidConfig, "ipam.network_name \"" + *name + "\" cannot name a pool (no '/', not '.' or '..')");
    }
    c.pool_name = *name;
    c.network_name = *name;
  }
  c.routes = PLUMB_TRY(detail::parse_routes(ipam, "ipam"));
  c.addresses = PLUMB_TRY(internal::parse_addresses(ipam));
  if (const json::Value* dns = PLUMB_TRY(json::get_object(ipam, "dns", "ipam")); dns != nullptr) {
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "nameservers", "ipam.dns"))) c.dns.nameservers = *v;
    if (auto v = PLUMB_TRY(json::get_string(*dns, "domain", "ipam.dns"))) c.dns.domain = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "search", "ipam.dns"))) c.dns.search = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "options", "ipam.dns"))) c.dns.options = *v;
  }
  PLUMB_TRY(add_endpoints(ipam, "etcd_host", c.etcd.endpoints));
  PLUMB_TRY(add_endpoints(ipam, "etcd_endpoints", c.etcd.endpoints));
  PLUMB_TRY(parse_datastore(ipam, c));
  if (c.datastore == Datastore::Kubernetes) return c;
  struct Text {
    const char* key;
    std::string* out;
  };
  for (Text t : {Text{"etcd_ca_cert_file", &c.etcd.ca_file}, Text{"etcd_cert_file", &c.etcd.cert_file},
                 Text{"etcd_key_file", &c.etcd.key_file}, Text{"etcd_username", &c.etcd.username},
                 Text{"etcd_password", &c.etcd.password}}) {
    if (auto v = PLUMB_TRY(json::get_string(ipam, t.key, "ipam"))) *t.out = *v;
  }
  if (c.etcd.cert_file.empty() != c.etcd.key_file.empty()) {
    return fail(cni_code::kInvalidConfig, "ipam.etcd_cert_file and ipam.etcd_key_file must be given together");
  }
  if (c.etcd.username.empty() && !c.etcd.password.empty()) {
    return fail(cni_code::kInvalidConfig, "ipam.etcd_password is set without ipam.etcd_username");
  }
  if (auto ms = PLUMB_TRY(json::get_int(ipam, "etcd_retry_timeout_ms", "ipam"))) {
    if (*ms < 1 || *ms > 600000) {
      return fail(cni_code::kInvalidConfig, "ipam.etcd_retry_timeout_ms must be 1..600000, got " + std::to_string(*ms));
    }
    c.etcd.retry_timeout_ms = static_cast<long>(*ms);
    c.etcd.request_timeout_ms = std::min(c.etcd.request_timeout_ms, c.etcd.retry_timeout_ms);
    c.etcd.connect_timeout_ms = std::min(c.etcd.connect_timeout_ms, c.etcd.retry_timeout_ms);
  }
  return c;
}

std::string key_text(const IpAddr& a) {
  char buf[48];
  if (a.is_v4()) {
    std::snprintf(buf, sizeof buf, "%03u.%03u.%03u.%03u", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
  } else {
    int n = 0;
    for (size_t i = 0; i < 8; ++i) {
      n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), i == 0 ? "%02x%02x" : ":%02x%02x", a.bytes[2 * i],
                         a.bytes[2 * i + 1]);
    }
  }
  return buf;
}

Result<IpAddr> parse_key_text(std::string_view text) {
  auto bad = [&] { return fail(cni_code::kDecode, "\"" + std::string(text) + "\" is not an address key"); };
  auto digits = [](std::string_view s, int base) -> std::optional<unsigned> {
    unsigned v = 0;
    for (char ch : s) {
      int d = -1;
      if (ch >= '0' && ch <= '9') d = ch - '0';
      if (base == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
      if (d < 0) return std::nullopt;
      v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    }
    return v;
  };
  IpAddr a;
  if (text.size() == 15) {  // ddd.ddd.ddd.ddd
    a.family = AF_INET;
    for (size_t i = 0; i < 4; ++i) {
      if (i > 0 && text[4 * i - 1] != '.') return bad();
      auto v = digits(text.substr(4 * i, 3), 10);
      if (!v || *v > 255) return bad();
      a.bytes[i] = static_cast<uint8_t>(*v);
    }
    return a;
  }
  if (text.size() == 39) {  // xxxx:xxxx:...
    a.family = AF_INET6;
    for (size_t i = 0; i < 8; ++i) {
      if (i > 0 && text[5 * i - 1] != ':') return bad();
      auto v = digits(text.substr(5 * i, 4), 16);
      if (!v) return bad();
      a.bytes[2 * i] = static_cast<uint8_t>(*v >> 8);
      a.bytes[2 * i + 1] = static_cast<uint8_t>(*v & 0xff);
    }
    return a;
  }
  return bad();
}

std::string ip_prefix(const std::string& pool) { return std::string(kIpRoot) + pool + "/"; }
std::string ip_key(const std::string& pool, const IpAddr& ip) { return ip_prefix(pool) + key_text(ip); }
std::string owner_prefix(const std::string& pool) { return std::string(kOwnerRoot) + pool + "/"; }
std::string owner_key(const std::string& pool, const std::string& container_id, const std::string& ifname) {
  return owner_prefix(pool) + container_id + "/" + ifname;
}
std::string cursor_key(const std::string& pool, const std::string& node) {
  return std::string(kCursorRoot) + pool + "/" + node;
}

Result<std::string> node_name() {
  std::string name;
  const char* env = std::getenv("NODE_NAME");
  if (env == nullptr || *env == '\0') env = std::getenv("NODENAME");  // whereabouts' variable
  if (env != nullptr && *env != '\0') {
    name = text::trim(env);
  } else {
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) != 0) {
      return fail(cni_code::kInvalidEnv, "cannot name this node: NODE_NAME is not set and gethostname failed");
    }
    name = host;
  }
  if (name.empty() || name.find('/') != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "node name \"" + name + "\" (NODE_NAME or host name) is empty or contains '/'");
  }
  return name;
}


}  // namespace plumb::ipam::cluster
