// Cluster-wide IPAM on etcd (see cluster.hpp for the config, the keys and the algorithm).
#include "ipam/cluster.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <random>
#include <set>

#include "ipam/host_local.hpp"

#include "engine/base/text.hpp"

namespace plumb::ipam::cluster {
namespace {

std::string plain_trim(std::string_view s) { return std::string(text::trim(s)); }

using u128 = unsigned __int128;
using etcd::Compare;
using etcd::TxnOp;

constexpr std::string_view kIpRoot = "/plumb/ipam/";
constexpr std::string_view kOwnerRoot = "/plumb/owners/";
constexpr std::string_view kCursorRoot = "/plumb/cursors/";
constexpr int kMaxClaims = 16;     // claim transactions per ADD before giving up on contention
constexpr int kMaxReleases = 8;    // release transactions per owner before giving up on churn
constexpr u128 kFirstWindow = 64;  // addresses in the first window read; doubles while full
constexpr u128 kMaxWindow = 4096;
constexpr int64_t kGcPage = 500;   // owner keys per GC range read

u128 to_u128(const IpAddr& a) {
  u128 v = 0;
  for (size_t i = 0; i < a.size(); ++i) v = (v << 8) | a.bytes[i];
  return v;
}

IpAddr from_u128(int family, u128 v) {
  IpAddr a;
  a.family = family;
  size_t n = family == AF_INET ? 4 : 16;
  for (size_t i = n; i-- > 0;) {
    a.bytes[i] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
  return a;
}


std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}


bool overlaps(const Pool& a, const Pool& b) {
  return a.start.family == b.start.family && a.start <= b.end && b.start <= a.end;
}

/// Who holds an address (the value of an address key; the owner key adds "ips").
struct Ident {
  std::string container_id;
  std::string ifname;
  std::string pod_ref;
  std::string node;
  std::string time;

  [[nodiscard]] bool same_attachment(const Ident& o) const {
    return container_id == o.container_id && ifname == o.ifname;
  }
  [[nodiscard]] std::string str() const {
    return "container " + container_id + " interface " + ifname + (pod_ref.empty() ? "" : " (pod " + pod_ref + ")") +
           (node.empty() ? "" : " on node " + node);
  }
};

std::string encode_ident(const Ident& id, const std::vector<IpPrefix>* ips) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("containerID");
  w.String(id.container_id.c_str());
  w.Key("ifname");
  w.String(id.ifname.c_str());
  w.Key("podRef");
  w.String(id.pod_ref.c_str());
  w.Key("node");
  w.String(id.node.c_str());
  w.Key("time");
  w.String(id.time.c_str());
  if (ips != nullptr) {
    w.Key("ips");
    w.StartArray();
    for (auto& p : *ips) w.String(p.str().c_str());
    w.EndArray();
  }
  w.EndObject();
  return {sb.GetString(), sb.GetSize()};
}

Result<Ident> decode_ident(const json::Value& v, const std::string& where) {
  if (!v.IsObject()) return fail(cni_code::kDecode, where + " is not a JSON object");
  Ident id;
  for (auto [key, out] : {std::pair{"containerID", &id.container_id}, std::pair{"ifname", &id.ifname},
                          std::pair{"podRef", &id.pod_ref}, std::pair{"node", &id.node}, std::pair{"time", &id.time}}) {
    auto s = json::get_string(v, key, where);
    if (!s) return std::unexpected(Error{cni_code::kDecode, 0, s.error().msg, {}});
    if (*s) *out = **s;
  }
  if (id.container_id.empty()) return fail(cni_code::kDecode, where + " has no containerID");
  return id;
}

Result<Ident> decode_holder(const etcd::KeyValue& kv) {
  auto doc = json::parse(kv.value, "etcd key " + kv.key);
  if (!doc) return std::unexpected(doc.error());
  return decode_ident(*doc, "etcd key " + kv.key);
}

std::string pod_ref_of(const Request& req) {
  auto name = detail::cni_arg(req, "K8S_POD_NAME");
  if (!name || name->empty()) return {};
  return detail::cni_arg(req, "K8S_POD_NAMESPACE").value_or("default") + "/" + *name;
}

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

/// Whom an allocation belongs to: (container ID, ifname), or for an IPAMClaim the owner id
/// (Request::owner) and kClaimIfname: a claim's addresses follow the claim whatever interface the
/// pod gives them. `need_ifname`: CNI_IFNAME must be valid (add/check; del takes what it gets).
constexpr std::string_view kClaimIfname = "claim";
Result<std::pair<std::string, std::string>> identity(const Request& req, const std::string& type, bool need_ifname) {
  const std::string& owner = req.owner;
  if (!owner.empty()) {
    if (owner.find('\0') != std::string::npos) return fail(cni_code::kInvalidConfig, type + ": allocation owner contains a NUL byte");
    return std::pair{owner, std::string(kClaimIfname)};
  }
  PLUMB_TRY(check_ids(req, type, need_ifname));
  return std::pair{req.container_id, req.ifname};
}

Result<IpAddr> parse_field_addr(const std::string& text, const std::string& field) {
  auto a = IpAddr::parse(plain_trim(text));
  if (!a) return std::unexpected(a.error().within(field));
  return *a;
}

/// One range entry: {range, range_start, range_end, exclude} of `obj`.
Result<Pool> parse_pool(const json::Value& obj, const std::string& where, const std::optional<IpAddr>& gateway) {
  if (!obj.IsObject()) return fail(cni_code::kInvalidConfig, where + " must be an object, got " + json::dump(obj));
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
        return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " must be an array of strings, got " + json::dump(*v));
      }
      for (auto& x : detail::split_list(e.GetString())) items.push_back(x);
    }
  } else {
    return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " must be a string or an array of strings, got " + json::dump(*v));
  }
  out.insert(out.end(), items.begin(), items.end());
  return {};
}

/// Candidate search over one pool: windows of addresses read with one keys-only range each,
/// starting at `origin` and wrapping once around the pool. The first candidate of a window is
/// its first free address (allocations stay compact); after a lost claim the window is re-read
/// in the claim's own failure branch and the next candidate is drawn at random from it, so two
/// nodes walking the same addresses fall out of step instead of colliding again and again.
class Scanner {
 public:
  Scanner(const Pool& pool, u128 origin_offset) : pool_(&pool) {
    base_ = to_u128(pool.start);
    size_ = to_u128(pool.end) - base_ + 1;
    origin_ = origin_offset % size_;
  }

  [[nodiscard]] bool needs_read() const { return free_.empty() && scanned_ < size_; }
  [[nodiscard]] bool exhausted() const { return free_.empty() && scanned_ >= size_; }

  /// The next window's first and last offsets (never wrapping past the pool's end).
  [[nodiscard]] std::pair<u128, u128> window() const {
    u128 p = scanned_ < size_ - origin_ ? origin_ + scanned_ : scanned_ - (size_ - origin_);
    u128 len = std::min({window_, size_ - scanned_, size_ - p});
    return {p, p + len - 1};
  }

  /// Keys-only read of the next window.
  [[nodiscard]] TxnOp read_op(const std::string& pool_name) const {
    auto [lo, hi] = window();
    return range_op(pool_name, lo, hi);
  }
  /// Keys-only read of the window the current candidates came from.
  [[nodiscard]] TxnOp reread_op(const std::string& pool_name) const { return range_op(pool_name, last_lo_, last_hi_); }

  /// Takes the answer to read_op(): the window's free allocatable addresses become candidates.
  void fill(const etcd::RangeResult& keys, const std::string& pool_name) {
    auto [lo, hi] = window();
    last_lo_ = lo;
    last_hi_ = hi;
    collect(keys, pool_name);
    scanned_ += hi - lo + 1;
    window_ = std::min(window_ * 2, kMaxWindow);
  }
  /// Takes the answer to reread_op(): the candidates are what is free there now.
  void refill(const etcd::RangeResult& keys, const std::string& pool_name) {
    free_.clear();
    collect(keys, pool_name);
  }

  /// The next candidate: the first free one, or with `rng` a random one of the window.
  IpAddr take(std::mt19937_64* rng) {
    size_t i = rng != nullptr ? static_cast<size_t>((*rng)() % free_.size()) : 0;
    IpAddr a = free_[i];
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
    return a;
  }

 private:
  [[nodiscard]] IpAddr addr(u128 off) const { return from_u128(pool_->start.family, base_ + off); }

  [[nodiscard]] TxnOp range_op(const std::string& pool_name, u128 lo, u128 hi) const {
    return TxnOp::range(ip_key(pool_name, addr(lo)), ip_key(pool_name, addr(hi)) + std::string(1, '\0'), true);
  }

  /// Free allocatable addresses of [last_lo_, last_hi_] given the keys found there.
  void collect(const etcd::RangeResult& keys, const std::string& pool_name) {
    const u128 lo = last_lo_, hi = last_hi_;
    const std::string prefix = ip_prefix(pool_name);
    std::set<u128> used;
    for (auto& kv : keys.kvs) {
      if (kv.key.rfind(prefix, 0) != 0) continue;
      auto a = parse_key_text(std::string_view(kv.key).substr(prefix.size()));
      if (!a || a->family != pool_->start.family) continue;
      u128 v = to_u128(*a);
      if (v >= base_ + lo && v <= base_ + hi) used.insert(v - base_);
    }
    for (u128 off = lo;; ++off) {
      IpAddr a = addr(off);
      auto ex = std::find_if(pool_->exclude.begin(), pool_->exclude.end(), [&](const IpPrefix& e) { return e.contains(a); });
      if (ex != pool_->exclude.end()) {
        u128 last = to_u128(ex->last());
        if (last >= base_ + hi) break;
        off = last - base_;  // skip the excluded block
        continue;
      }
      if (!used.contains(off) && pool_->allocatable(a)) free_.push_back(a);
      if (off == hi) break;  // hi may be the largest offset of a huge IPv6 pool: no off <= hi loop
    }
  }

  const Pool* pool_;
  u128 base_ = 0, size_ = 0, origin_ = 0, scanned_ = 0, window_ = kFirstWindow;
  u128 last_lo_ = 0, last_hi_ = 0;
  std::deque<IpAddr> free_;
};

/// Requested addresses (CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips), one slot per pool.
Result<std::vector<std::optional<IpAddr>>> requested(const Request& req, const Config& cfg) {
  const auto texts = PLUMB_TRY(detail::requested_ip_texts(req));
  std::vector<std::optional<IpAddr>> want(cfg.pools.size());
  for (auto& [src, text] : texts) {
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

/// Measures the etcd requests of one add() into stats.requests when it returns.
struct RequestCounter {
  AddStats& stats;
  const etcd::Client& client;
  uint64_t start;
  ~RequestCounter() { stats.requests = client.requests() - start; }
};

}  // namespace

struct ClusterIpam::Owner {
  std::string key;
  int64_t mod_revision = 0;
  Ident id;
  std::vector<IpPrefix> ips;

  static Result<Owner> decode(const etcd::KeyValue& kv) {
    Owner o;
    o.key = kv.key;
    o.mod_revision = kv.mod_revision;
    auto doc = json::parse(kv.value, "etcd key " + kv.key);
    if (!doc) return std::unexpected(doc.error());
    o.id = PLUMB_TRY(decode_ident(*doc, "etcd key " + kv.key));
    auto ips = json::get_string_array(*doc, "ips", "etcd key " + kv.key);
    if (!ips) return std::unexpected(Error{cni_code::kDecode, 0, ips.error().msg, {}});
    if (*ips) {
      for (auto& s : **ips) {
        auto p = IpPrefix::parse(s);
        if (!p) return std::unexpected(Error{cni_code::kDecode, 0, p.error().msg, {}}.within("etcd key " + kv.key));
        o.ips.push_back(*p);
      }
    }
    return o;
  }
};

bool Pool::contains(const IpAddr& a) const { return a.family == start.family && start <= a && a <= end; }

bool Pool::allocatable(const IpAddr& a) const {
  if (!contains(a)) return false;
  if (gateway && a == *gateway) return false;
  if (a.is_v4() && (a == subnet.addr || a == subnet.last())) return false;
  return std::none_of(exclude.begin(), exclude.end(), [&](const IpPrefix& e) { return e.contains(a); });
}

std::string Pool::str() const { return subnet.str() + " (" + start.str() + "-" + end.str() + ")"; }

Result<Config> parse_config(const json::Value& ipam) {
  if (!ipam.IsObject()) return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::dump(ipam));
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
  }
  c.routes = PLUMB_TRY(detail::parse_routes(ipam, "ipam"));
  if (const json::Value* dns = PLUMB_TRY(json::get_object(ipam, "dns", "ipam")); dns != nullptr) {
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "nameservers", "ipam.dns"))) c.dns.nameservers = *v;
    if (auto v = PLUMB_TRY(json::get_string(*dns, "domain", "ipam.dns"))) c.dns.domain = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "search", "ipam.dns"))) c.dns.search = *v;
    if (auto v = PLUMB_TRY(json::get_string_array(*dns, "options", "ipam.dns"))) c.dns.options = *v;
  }
  PLUMB_TRY(add_endpoints(ipam, "etcd_host", c.etcd.endpoints));
  PLUMB_TRY(add_endpoints(ipam, "etcd_endpoints", c.etcd.endpoints));
  if (c.etcd.endpoints.empty()) {
    auto store = PLUMB_TRY(json::get_string(ipam, "datastore", "ipam"));
    std::string why = store && *store == "kubernetes"
                          ? " (ipam.datastore \"kubernetes\" is not supported: plumb keeps cluster pools in etcd)"
                          : "";
    return fail(cni_code::kInvalidConfig, "ipam.etcd_host (or ipam.etcd_endpoints) is missing" + why);
  }
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
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') {
    name = env;
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

ClusterIpam::ClusterIpam(Config cfg, std::string node, etcd::Client client)
    : cfg_(std::move(cfg)), node_(std::move(node)), client_(std::move(client)) {}

Result<cni::CniResult> ClusterIpam::from_owner(const Owner& o) {
  // The address keys must still name this attachment: read them all in one transaction.
  std::vector<TxnOp> reads;
  reads.reserve(o.ips.size());
  for (auto& ip : o.ips) reads.push_back(TxnOp::range(ip_key(cfg_.pool_name, ip.addr)));
  auto got = PLUMB_TRY(client_.txn({}, reads, {}));
  cni::CniResult r;
  for (size_t i = 0; i < o.ips.size(); ++i) {
    const IpPrefix& ip = o.ips[i];
    if (got.ranges[i].kvs.empty()) {
      return fail(cni_code::kConflict, cfg_.type + ": " + o.id.str() + " is recorded with " + ip.addr.str() +
                                           " but that address is no longer allocated in pool \"" + cfg_.pool_name +
                                           "\"; DEL the attachment and ADD it again");
    }
    auto holder = PLUMB_TRY(decode_holder(got.ranges[i].kvs[0]));
    if (!holder.same_attachment(o.id)) {
      return fail(cni_code::kConflict, cfg_.type + ": " + o.id.str() + " is recorded with " + ip.addr.str() +
                                           " but that address is held by " + holder.str());
    }
    cni::IpConfig c{ip, std::nullopt, std::nullopt};
    for (auto& pool : cfg_.pools) {
      if (pool.subnet.contains(ip.addr) && pool.gateway) c.gateway = pool.gateway;
    }
    r.ips.push_back(c);
  }
  r.routes = cfg_.routes;
  r.dns = cfg_.dns;
  return r;
}

Result<cni::CniResult> ClusterIpam::add(const Request& req) {
  stats_ = {};
  RequestCounter counter{stats_, client_, client_.requests()};
  auto [who_id, who_if] = PLUMB_TRY(identity(req, cfg_.type, true));
  auto want = PLUMB_TRY(requested(req, cfg_));
  Ident me{who_id, who_if, pod_ref_of(req), node_, now_rfc3339()};
  const std::string okey = owner_key(cfg_.pool_name, who_id, who_if);
  const std::string ckey = cursor_key(cfg_.pool_name, node_);
  auto held_check = [&](const Owner& o) -> Status {
    for (auto& w : want) {
      if (!w) continue;
      bool has = std::any_of(o.ips.begin(), o.ips.end(), [&](const IpPrefix& p) { return p.addr == *w; });
      if (!has) {
        return fail(cni_code::kConflict, cfg_.type + ": " + o.id.str() + " already holds other addresses in pool \"" +
                                             cfg_.pool_name + "\"; requested IP " + w->str() + " not given");
      }
    }
    return {};
  };

  // 1. One read: what this attachment already holds, and where this node stopped last time.
  auto first = PLUMB_TRY(client_.txn({}, {TxnOp::range(okey), TxnOp::range(ckey)}, {}));
  if (!first.ranges[0].kvs.empty()) {
    Owner o = PLUMB_TRY(Owner::decode(first.ranges[0].kvs[0]));
    PLUMB_TRY(held_check(o));
    return from_owner(o);
  }
  json::Document cursor(rapidjson::kObjectType);
  if (!first.ranges[1].kvs.empty()) {
    auto c = json::parse(first.ranges[1].kvs[0].value, "cursor");
    if (c && c->IsObject()) cursor = std::move(*c);
  }

  // 2. A scanner per pool without a requested address, starting after this node's cursor or at
  //    its hash offset.
  std::vector<std::optional<Scanner>> scan(cfg_.pools.size());
  for (size_t i = 0; i < cfg_.pools.size(); ++i) {
    if (want[i]) continue;
    const Pool& pool = cfg_.pools[i];
    u128 size = to_u128(pool.end) - to_u128(pool.start) + 1;
    u128 origin = text::fnv1a64(node_ + "\n" + cfg_.pool_name + "\n" + pool.str()) % size;
    if (const json::Value* last = json::find(cursor, pool.str()); last != nullptr && last->IsString()) {
      auto a = IpAddr::parse(last->GetString());
      if (a && pool.contains(*a)) origin = (to_u128(*a) - to_u128(pool.start) + 1) % size;
    }
    scan[i].emplace(pool, origin);
  }

  // 3. Claim: one transaction for every address and the owner key, all or nothing.
  std::mt19937_64 rng(text::fnv1a64(node_ + req.container_id + req.ifname) ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < kMaxClaims; ++attempt) {
    // Read the next window of every pool that has no candidate left, all in one request.
    for (;;) {
      std::vector<size_t> idx;
      std::vector<TxnOp> reads;
      for (size_t i = 0; i < scan.size(); ++i) {
        if (scan[i] && scan[i]->needs_read()) {
          idx.push_back(i);
          reads.push_back(scan[i]->read_op(cfg_.pool_name));
        }
      }
      if (reads.empty()) break;
      auto got = PLUMB_TRY(client_.txn({}, reads, {}));
      stats_.windows += static_cast<int>(reads.size());
      for (size_t k = 0; k < idx.size(); ++k) scan[idx[k]]->fill(got.ranges[k], cfg_.pool_name);
    }
    for (size_t i = 0; i < scan.size(); ++i) {
      if (scan[i] && scan[i]->exhausted()) {
        return fail(cni_code::kIpamExhausted, cfg_.type + ": pool exhausted: no free address left in range " +
                                                  cfg_.pools[i].str() + " of pool \"" + cfg_.pool_name + "\"");
      }
    }
    std::vector<IpAddr> cand(cfg_.pools.size());
    std::vector<IpPrefix> ips;
    for (size_t i = 0; i < cand.size(); ++i) {
      cand[i] = want[i] ? *want[i] : scan[i]->take(attempt > 0 ? &rng : nullptr);
      ips.push_back(IpPrefix{cand[i], cfg_.pools[i].subnet.len});
      if (scan[i]) json::set_string(cursor, cfg_.pools[i].str(), cand[i].str(), cursor.GetAllocator());
    }
    std::vector<Compare> cmp{Compare{okey, Compare::Target::Create, Compare::Op::Equal, 0, {}}};
    std::vector<TxnOp> success, failure{TxnOp::range(okey)};
    const std::string ip_value = encode_ident(me, nullptr);
    for (auto& c : cand) {
      std::string k = ip_key(cfg_.pool_name, c);
      cmp.push_back(Compare{k, Compare::Target::Create, Compare::Op::Equal, 0, {}});
      success.push_back(TxnOp::put(k, ip_value));
      failure.push_back(TxnOp::range(k));
    }
    success.push_back(TxnOp::put(okey, encode_ident(me, &ips)));
    success.push_back(TxnOp::put(ckey, json::dump(cursor)));
    for (auto& sc : scan) {
      if (sc) failure.push_back(sc->reread_op(cfg_.pool_name));  // fresh candidates if we lose
    }
    ++stats_.claims;
    auto r = PLUMB_TRY(client_.txn(cmp, success, failure));
    if (r.succeeded) {
      cni::CniResult out;
      for (size_t i = 0; i < cand.size(); ++i) out.ips.push_back(cni::IpConfig{ips[i], cfg_.pools[i].gateway, std::nullopt});
      out.routes = cfg_.routes;
      out.dns = cfg_.dns;
      return out;
    }
    // Someone was faster. The same attachment (a concurrent or retried ADD): take its result.
    if (!r.ranges[0].kvs.empty()) {
      Owner o = PLUMB_TRY(Owner::decode(r.ranges[0].kvs[0]));
      PLUMB_TRY(held_check(o));
      return from_owner(o);
    }
    size_t reread = 1 + cand.size();
    for (auto& sc : scan) {
      if (sc) sc->refill(r.ranges[reread++], cfg_.pool_name);  // the window as it is now
    }
    for (size_t i = 0; i < cand.size(); ++i) {
      const auto& kvs = r.ranges[i + 1].kvs;
      if (kvs.empty()) continue;
      if (want[i]) {
        auto holder = decode_holder(kvs[0]);
        return fail(cni_code::kIpamExhausted, cfg_.type + ": requested IP " + cand[i].str() + " is already allocated in pool \"" +
                                                  cfg_.pool_name + "\"" + (holder ? " to " + holder->str() : std::string()));
      }
    }
  }
  return fail(cni_code::kTryAgainLater, cfg_.type + ": could not claim addresses in pool \"" + cfg_.pool_name + "\" after " +
                                            std::to_string(kMaxClaims) + " transactions: other nodes kept taking the candidates");
}

Status ClusterIpam::release_owner(const std::string& okey, int attempts, std::optional<int64_t> expect_mod) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    auto got = PLUMB_TRY(client_.range(okey));
    if (got.kvs.empty()) return {};
    if (expect_mod && got.kvs[0].mod_revision != *expect_mod) return {};  // re-created since listed
    std::vector<Compare> cmp{Compare{okey, Compare::Target::Mod, Compare::Op::Equal, got.kvs[0].mod_revision, {}}};
    std::vector<TxnOp> dels{TxnOp::del(okey)};
    auto o = Owner::decode(got.kvs[0]);
    if (o && !o->ips.empty()) {
      std::vector<TxnOp> reads;
      for (auto& ip : o->ips) reads.push_back(TxnOp::range(ip_key(cfg_.pool_name, ip.addr)));
      auto held = PLUMB_TRY(client_.txn({}, reads, {}));
      for (auto& rr : held.ranges) {
        if (rr.kvs.empty()) continue;
        auto holder = decode_holder(rr.kvs[0]);
        if (!holder || !holder->same_attachment(o->id)) continue;  // someone else's now: not ours to free
        cmp.push_back(Compare{rr.kvs[0].key, Compare::Target::Mod, Compare::Op::Equal, rr.kvs[0].mod_revision, {}});
        dels.push_back(TxnOp::del(rr.kvs[0].key));
      }
    }
    auto r = PLUMB_TRY(client_.txn(cmp, dels, {}));
    if (r.succeeded) return {};
  }
  return fail(cni_code::kTryAgainLater, cfg_.type + ": release of " + okey + " kept changing under " +
                                            std::to_string(attempts) + " attempts");
}

Status ClusterIpam::del(const Request& req) {
  // A pod's DEL releases what container+ifname holds; an IPAMClaim's addresses only go when
  // Request::owner names the claim (GC of a deleted claim).
  auto [who_id, who_if] = PLUMB_TRY(identity(req, cfg_.type, false));
  if (who_if.empty()) return {};  // owners are per interface; nothing can be named
  auto st = release_owner(owner_key(cfg_.pool_name, who_id, who_if), kMaxReleases);
  if (!st) return std::unexpected(st.error().within(cfg_.type + ": release " + who_id + " interface " + who_if));
  return {};
}

Status ClusterIpam::release_address(const IpAddr& ip, const std::string& container_id, const std::string& ifname) {
  const std::string ikey = ip_key(cfg_.pool_name, ip);
  const std::string okey = owner_key(cfg_.pool_name, container_id, ifname);
  const Ident who{container_id, ifname, {}, {}, {}};
  for (int attempt = 0; attempt < kMaxReleases; ++attempt) {
    auto got = PLUMB_TRY(client_.txn({}, {TxnOp::range(ikey), TxnOp::range(okey)}, {}));
    if (got.ranges[0].kvs.empty()) return {};
    const auto& kv = got.ranges[0].kvs[0];
    auto holder = PLUMB_TRY(decode_holder(kv));
    if (!holder.same_attachment(who)) {
      return fail(cni_code::kConflict, cfg_.type + ": " + ip.str() + " in pool \"" + cfg_.pool_name + "\" is held by " +
                                           holder.str() + ", not by container " + container_id + " interface " + ifname +
                                           ": not released");
    }
    std::vector<Compare> cmp{Compare{ikey, Compare::Target::Mod, Compare::Op::Equal, kv.mod_revision, {}}};
    std::vector<TxnOp> ops{TxnOp::del(ikey)};
    if (!got.ranges[1].kvs.empty()) {
      const auto& okv = got.ranges[1].kvs[0];
      cmp.push_back(Compare{okey, Compare::Target::Mod, Compare::Op::Equal, okv.mod_revision, {}});
      auto o = Owner::decode(okv);
      if (o) {
        std::erase_if(o->ips, [&](const IpPrefix& p) { return p.addr == ip; });
        ops.push_back(o->ips.empty() ? TxnOp::del(okey) : TxnOp::put(okey, encode_ident(o->id, &o->ips)));
      }
    }
    auto r = PLUMB_TRY(client_.txn(cmp, ops, {}));
    if (r.succeeded) return {};
  }
  return fail(cni_code::kTryAgainLater, cfg_.type + ": release of " + ip.str() + " kept changing under " +
                                            std::to_string(kMaxReleases) + " attempts");
}

Status ClusterIpam::check(const Request& req, const cni::CniResult& prev) {
  auto [who_id, who_if] = PLUMB_TRY(identity(req, cfg_.type, true));
  const std::string who = "container " + who_id + " interface " + who_if;
  auto got = PLUMB_TRY(client_.range(owner_key(cfg_.pool_name, who_id, who_if)));
  if (got.kvs.empty()) {
    return fail(cni_code::kNotFound, cfg_.type + ": " + who + " holds no address in pool \"" + cfg_.pool_name + "\"");
  }
  Owner o = PLUMB_TRY(Owner::decode(got.kvs[0]));
  auto r = from_owner(o);
  if (!r) return fail(cni_code::kNotFound, r.error().msg);
  for (const cni::IpConfig& ip : prev.ips) {
    bool held = std::any_of(r->ips.begin(), r->ips.end(), [&](auto& c) { return c.address.addr == ip.address.addr; });
    if (!held) {
      return fail(cni_code::kNotFound, cfg_.type + ": " + ip.address.addr.str() + " is not held by " + who + " in pool \"" +
                                           cfg_.pool_name + "\"");
    }
  }
  return {};
}

Status ClusterIpam::gc(const Request&, const KeepFn& keep) {
  const std::string prefix = owner_prefix(cfg_.pool_name);
  const std::string end = etcd::prefix_end(prefix);
  std::string from = prefix;
  Status first;
  for (;;) {
    auto page = PLUMB_TRY(client_.range(from, end, false, kGcPage));
    for (auto& kv : page.kvs) {
      auto o = Owner::decode(kv);
      if (!o || o->id.node != node_) continue;
      if (std::string_view(o->id.container_id).starts_with(kClaimOwnerPrefix)) continue;  // an IPAMClaim's
      if (keep(o->id.container_id, o->id.ifname)) continue;
      auto st = release_owner(kv.key, kMaxReleases, kv.mod_revision);
      if (!st && first) first = std::unexpected(st.error().within(cfg_.type + ": GC of " + o->id.str()));
    }
    if (!page.more || page.kvs.empty()) break;
    from = page.kvs.back().key + std::string(1, '\0');
  }
  return first;
}

Result<std::unique_ptr<ClusterIpam>> make(const json::Value& ipam, const std::string& node) {
  Config cfg = PLUMB_TRY(parse_config(ipam));
  if (node.empty() || node.find('/') != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "node name \"" + node + "\" is empty or contains '/'");
  }
  auto client = etcd::Client::make(cfg.etcd);
  if (!client) return std::unexpected(client.error().within("ipam"));
  return std::make_unique<ClusterIpam>(std::move(cfg), node, std::move(*client));
}

}  // namespace plumb::ipam::cluster

namespace plumb::ipam::detail {

Result<std::unique_ptr<Ipam>> make_cluster(const json::Value& ipam) {
  // Validate the config before asking for the node name, so config errors come first.
  PLUMB_TRY(cluster::parse_config(ipam));
  std::string node = PLUMB_TRY(cluster::node_name());
  auto c = PLUMB_TRY(cluster::make(ipam, node));
  return std::unique_ptr<Ipam>(std::move(c));
}

}  // namespace plumb::ipam::detail
