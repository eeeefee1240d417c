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

#include "ipam/cluster_internal.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/host_local.hpp"

#include "engine/base/text.hpp"

namespace plumb::ipam::cluster {
namespace {
using internal::from_u128;
using internal::identity;
using internal::pod_ref_of;
using internal::requested;
using internal::to_u128;
using internal::u128;
using etcd::Compare;
using etcd::TxnOp;

constexpr int kMaxClaims = 16;     // claim transactions per ADD before giving up on contention
constexpr int kMaxReleases = 8;    // release transactions per owner before giving up on churn
constexpr u128 kFirstWindow = 64;  // addresses in the first window read; doubles while full
constexpr u128 kMaxWindow = 4096;
constexpr int64_t kGcPage = 500;   // owner keys per GC range read



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

/// Measures the etcd requests of one add() into stats.requests when it returns.
struct RequestCounter {
  AddStats& stats;
  const etcd::Client& client;
  uint64_t start;
  ~RequestCounter() { stats.requests = client.requests() - start; }
};

/// The pool's scanners (nullopt where an address is requested), each starting after this
/// node's cursor (`cursor`: {"<pool.str()>": "<last address given>"}) or at the node's hash offset.
std::vector<std::optional<Scanner>> start_scanners(const Config& cfg, const std::string& node,
                                                   const std::vector<std::optional<IpAddr>>& want,
                                                   const json::Value& cursor) {
  std::vector<std::optional<Scanner>> scan(cfg.pools.size());
  for (size_t i = 0; i < cfg.pools.size(); ++i) {
    if (want[i]) continue;
    const Pool& pool = cfg.pools[i];
    u128 size = to_u128(pool.end) - to_u128(pool.start) + 1;
    u128 origin = text::fnv1a64(node + "\n" + cfg.pool_name + "\n" + pool.str()) % size;
    if (const json::Value* last = json::find(cursor, pool.str()); last != nullptr && last->IsString()) {
      auto a = IpAddr::parse(last->GetString());
      if (a && pool.contains(*a)) origin = (to_u128(*a) - to_u128(pool.start) + 1) % size;
    }
    scan[i].emplace(pool, origin);
  }
  return scan;
}

/// Reads the next window of every scanner that has no candidate left, in one request per
/// round, until each has a candidate or is exhausted. Errors: etcd's.
Status read_windows(etcd::Client& client, const std::string& pool_name, std::vector<std::optional<Scanner>>& scan,
                    AddStats& stats) {
  for (;;) {
    std::vector<size_t> idx;
    std::vector<TxnOp> reads;
    for (size_t i = 0; i < scan.size(); ++i) {
      if (scan[i] && scan[i]->needs_read()) {
        idx.push_back(i);
        reads.push_back(scan[i]->read_op(pool_name));
      }
    }
    if (reads.empty()) return {};
    auto got = PLUMB_TRY(client.txn({}, reads, {}));
    stats.windows += static_cast<int>(reads.size());
    for (size_t k = 0; k < idx.size(); ++k) scan[idx[k]]->fill(got.ranges[k], pool_name);
  }
}

/// An error when an owner already holding `held` does not hold every requested address.
Status held_check(const Config& cfg, const Ident& id, const std::vector<IpPrefix>& held,
                  const std::vector<std::optional<IpAddr>>& want) {
  for (auto& w : want) {
    if (!w) continue;
    bool has = std::any_of(held.begin(), held.end(), [&](const IpPrefix& p) { return p.addr == *w; });
    if (!has) {
      return fail(cni_code::kConflict, cfg.type + ": " + id.str() + " already holds other addresses in pool \"" +
                                           cfg.pool_name + "\"; requested IP " + w->str() + " not given");
    }
  }
  return {};
}

/// One claim: every candidate address key and the owner key must be absent; on success they and
/// the cursor are written; on failure the owner key, each candidate and each scanner's window
/// are read back (in that order) to learn who won.
struct ClaimTxn {
  std::vector<Compare> cmp;
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
};

ClaimTxn claim_txn(const Config& cfg, const std::string& okey, const std::string& ckey, const Ident& me,
                   const std::vector<IpAddr>& cand, const std::vector<IpPrefix>& ips, const json::Value& cursor,
                   const std::vector<std::optional<Scanner>>& scan) {
  ClaimTxn t;
  t.cmp.push_back(Compare{okey, Compare::Target::Create, Compare::Op::Equal, 0, {}});
  t.failure.push_back(TxnOp::range(okey));
  const std::string ip_value = encode_ident(me, nullptr);
  for (auto& c : cand) {
    std::string k = ip_key(cfg.pool_name, c);
    t.cmp.push_back(Compare{k, Compare::Target::Create, Compare::Op::Equal, 0, {}});
    t.success.push_back(TxnOp::put(k, ip_value));
    t.failure.push_back(TxnOp::range(k));
  }
  t.success.push_back(TxnOp::put(okey, encode_ident(me, &ips)));
  t.success.push_back(TxnOp::put(ckey, json::dump(cursor)));
  for (auto& sc : scan) {
    if (sc) t.failure.push_back(sc->reread_op(cfg.pool_name));  // fresh candidates if we lose
  }
  return t;
}


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
  Ident me{who_id, who_if, pod_ref_of(req), node_, text::utc_now_rfc3339()};
  const std::string okey = owner_key(cfg_.pool_name, who_id, who_if);
  const std::string ckey = cursor_key(cfg_.pool_name, node_);

  // 1. One read: what this attachment already holds, and where this node stopped last time.
  auto first = PLUMB_TRY(client_.txn({}, {TxnOp::range(okey), TxnOp::range(ckey)}, {}));
  if (!first.ranges[0].kvs.empty()) {
    Owner o = PLUMB_TRY(Owner::decode(first.ranges[0].kvs[0]));
    PLUMB_TRY(held_check(cfg_, o.id, o.ips, want));
    return from_owner(o);
  }
  json::Document cursor(rapidjson::kObjectType);
  if (!first.ranges[1].kvs.empty()) {
    auto c = json::parse(first.ranges[1].kvs[0].value, "cursor");
    if (c && c->IsObject()) cursor = std::move(*c);
  }

  // 2. A scanner per pool without a requested address.
  auto scan = start_scanners(cfg_, node_, want, cursor);

  // 3. Claim: one transaction for every address and the owner key, all or nothing.
  std::mt19937_64 rng(text::fnv1a64(node_ + req.container_id + req.ifname) ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < kMaxClaims; ++attempt) {
    PLUMB_TRY(read_windows(client_, cfg_.pool_name, scan, stats_));
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
    ClaimTxn t = claim_txn(cfg_, okey, ckey, me, cand, ips, cursor, scan);
    ++stats_.claims;
    auto r = PLUMB_TRY(client_.txn(t.cmp, t.success, t.failure));
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
      PLUMB_TRY(held_check(cfg_, o.id, o.ips, want));
      return from_owner(o);
    }
    size_t reread = 1 + cand.size();
    for (auto& sc : scan) {
      if (sc) sc->refill(r.ranges[reread++], cfg_.pool_name);  // the window as it is now
    }
    for (size_t i = 0; i < cand.size(); ++i) {
      const auto& kvs = r.ranges[i + 1].kvs;
      if (kvs.empty() || !want[i]) continue;
      auto holder = decode_holder(kvs[0]);
      return fail(cni_code::kIpamExhausted, cfg_.type + ": requested IP " + cand[i].str() + " is already allocated in pool \"" +
                                                cfg_.pool_name + "\"" + (holder ? " to " + holder->str() : std::string()));
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

Result<std::vector<ClusterIpam::OwnerEntry>> ClusterIpam::owners() {
  const std::string prefix = owner_prefix(cfg_.pool_name);
  const std::string end = etcd::prefix_end(prefix);
  std::string from = prefix;
  std::vector<OwnerEntry> out;
  for (;;) {
    auto page = PLUMB_TRY(client_.range(from, end, false, kGcPage));
    for (auto& kv : page.kvs) {
      auto o = Owner::decode(kv);
      if (!o) continue;  // not ours to judge
      out.push_back(OwnerEntry{kv.key, kv.mod_revision, o->id.container_id, o->id.ifname, o->id.pod_ref, o->id.node, o->ips});
    }
    if (!page.more || page.kvs.empty()) break;
    from = page.kvs.back().key + std::string(1, '\0');
  }
  return out;
}

Status ClusterIpam::release_entry(const OwnerEntry& e) { return release_owner(e.key, kMaxReleases, e.mod_revision); }

Status ClusterIpam::gc(const Request&, const KeepFn& keep) {
  Status first;
  for (const OwnerEntry& o : PLUMB_TRY(owners())) {
    if (o.node != node_) continue;
    if (std::string_view(o.container_id).starts_with(kClaimOwnerPrefix)) continue;  // an IPAMClaim's
    if (keep(o.container_id, o.ifname)) continue;
    auto st = release_entry(o);
    if (!st && first) {
      first = std::unexpected(st.error().within(cfg_.type + ": GC of container " + o.container_id + " interface " + o.ifname));
    }
  }
  return first;
}

Result<std::unique_ptr<ClusterIpam>> make(const json::Value& ipam, const std::string& node) {
  Config cfg = PLUMB_TRY(parse_config(ipam));
  if (cfg.datastore != Datastore::Etcd) {
    return fail(cni_code::kInvalidConfig, cfg.type + ": no etcd_host or etcd_endpoints: this pool lives in the Kubernetes API");
  }
  if (node.empty() || node.find('/') != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "node name \"" + node + "\" is empty or contains '/'");
  }
  auto client = etcd::Client::make(cfg.etcd);
  if (!client) return std::unexpected(client.error().within("ipam"));
  return std::make_unique<ClusterIpam>(std::move(cfg), node, std::move(*client));
}

}  // namespace plumb::ipam::cluster

namespace plumb::ipam::detail {

Result<std::unique_ptr<Ipam>> make_cluster(const json::Value& nad_ipam, const ClusterAccess* access) {
  const json::Document ipam = PLUMB_TRY(cluster::internal::with_flat_file(nad_ipam, cluster::internal::kFlatFiles));
  // Validate the config before asking for the node name, so config errors come first.
  auto cfg = PLUMB_TRY(cluster::parse_config(ipam));
  std::string node = PLUMB_TRY(cluster::node_name());
  auto statics = cfg.addresses;
  std::unique_ptr<Ipam> pool;
  if (cfg.datastore == cluster::Datastore::Kubernetes) {
    auto k = cluster::make_kube(std::move(cfg), node, access);
    if (!k) return std::unexpected(k.error().within("ipam"));
    pool = std::move(*k);
  } else {
    pool = PLUMB_TRY(cluster::make(ipam, node));
  }
  return cluster::internal::with_statics(std::move(pool), std::move(statics));
}

}  // namespace plumb::ipam::detail
