// The cluster IPAM on whereabouts' Kubernetes objects (cluster_kube.hpp): allocation, release,
// check and GC. Node slices are in cluster_kube_slices.cpp.
#include "ipam/cluster_kube.hpp"

#include <chrono>
#include <random>
#include <set>

#include "engine/base/text.hpp"
#include "ipam/cluster_internal.hpp"
#include "ipam/cluster_kube_internal.hpp"

namespace plumb::ipam::cluster {
namespace {

using internal::from_u128;
using internal::to_u128;
using kube::Site;
using kube::Who;
using wb::u128;

constexpr int kMaxWrites = 24;    // writes per range of one ADD before giving up on contention
constexpr int kRereadEvery = 3;   // lost writes between two reads of the pool
constexpr int kMaxReleases = 8;   // release writes per range before giving up on churn

/// The first free address of `s` from offset `origin` of its range (wrapping once), skipping
/// `taken` and what the pool holds. Each address that is not free is held, taken, the gateway,
/// a network/broadcast address or in an excluded block (skipped whole): the scan is bounded by
/// their count, not by the size of the range.
std::optional<IpAddr> next_free(const Site& s, const wb::IpPool& p, const std::set<u128>& taken, u128 origin) {
  const u128 lo = to_u128(s.pool.start), hi = to_u128(s.pool.end), size = hi - lo + 1;
  const u128 base = to_u128(p.range.addr);
  const int family = s.pool.start.family;
  u128 budget = p.allocations.size() + taken.size() + s.pool.exclude.size() + 4;
  u128 i = origin % size;
  for (u128 seen = 0; seen < size && budget > 0; --budget) {
    const u128 v = lo + i;
    const IpAddr a = from_u128(family, v);
    auto ex = std::find_if(s.pool.exclude.begin(), s.pool.exclude.end(), [&](const IpPrefix& e) { return e.contains(a); });
    u128 step = 1;
    if (ex != s.pool.exclude.end()) {
      step = std::min(to_u128(ex->last()), hi) - v + 1;  // the whole excluded block at once
    } else if (s.pool.allocatable(a) && !taken.contains(v) && !(v >= base && p.allocations.contains(v - base))) {
      return a;
    }
    seen += step;
    i = (i + step) % size;
  }
  return std::nullopt;
}

}  // namespace

// ---- one request's work -------------------------------------------------------------------------

Result<std::optional<wb::IpPool>> KubeClusterIpam::Impl::load(const Site& s) {
  const std::string path = wb::pools_path(ipam.ns_, s.name);
  auto resp = PLUMB_TRY(ipam.client_->request("GET", path));
  if (resp.status == 404) return std::optional<wb::IpPool>{};
  if (resp.status != 200) return std::unexpected(ipam.client_->http_error("read IPPool " + ipam.ns_ + "/" + s.name, "GET", path, resp));
  return std::optional<wb::IpPool>(PLUMB_TRY(wb::parse_pool(std::move(resp.body), "IPPool " + ipam.ns_ + "/" + s.name)));
}

Result<KubeClusterIpam::Impl::Write> KubeClusterIpam::Impl::send(std::string_view method, const std::string& path,
                                                                 const std::string& body, std::string_view type,
                                                                 const std::string& what) {
  auto resp = PLUMB_TRY(ipam.client_->request(method, path, body, type));
  if (resp.status == 200 || resp.status == 201) return Write::Won;
  if (resp.status == 422 || resp.status == 409) return Write::Lost;  // a test failed / AlreadyExists / conflict
  if (resp.status == 404) return Write::Gone;
  return std::unexpected(ipam.client_->http_error(what, method, path, resp));
}

std::string KubeClusterIpam::Impl::pool_what(const Site& s) const {
  return ipam.cfg_.type + ": IPPool " + ipam.ns_ + "/" + s.name + " (" + s.pool.str() + ")";
}

Result<KubeClusterIpam::Impl::Write> KubeClusterIpam::Impl::put_slot(const Site& s, const wb::IpPool* pool,
                                                                     const IpAddr& a, const Who& who) {
  if (pool == nullptr) {  // no pool yet: create it holding the allocation
    const u128 off = to_u128(a) - to_u128(s.range.addr);
    std::string body = wb::encode_pool(ipam.ns_, s.name, s.range, {{off, who.allocation()}});
    auto w = PLUMB_TRY(send("POST", wb::pools_path(ipam.ns_), body, k8s::kJson, "create " + pool_what(s)));
    return w == Write::Lost ? Write::Gone : w;  // AlreadyExists: read it and go on
  }
  return send("PATCH", wb::pools_path(ipam.ns_, s.name), wb::claim_patch(pool->offset_of(a), who.allocation()),
              k8s::kJsonPatch, "allocate " + a.str() + " in " + pool_what(s));
}

Status KubeClusterIpam::Impl::release_slot(const Site& s, const IpAddr& base, const IpAddr& a, const Who& who) {
  auto body = wb::release_patch({{to_u128(a) - to_u128(base), who.id}});
  PLUMB_TRY(send("PATCH", wb::pools_path(ipam.ns_, s.name), body, k8s::kJsonPatch, "release " + a.str() + " in " + pool_what(s)));
  return {};
}

Result<KubeClusterIpam::Impl::Claimed> KubeClusterIpam::Impl::claim(const Site& s, const Who& who,
                                                                    const std::optional<IpAddr>& want) {
  std::set<u128> taken;
  std::optional<wb::IpPool> pool;
  bool need_read = true;
  int lost = 0;
  u128 origin = text::fnv1a64(ipam.node_ + "\n" + s.name);
  for (int attempt = 0; attempt < kMaxWrites; ++attempt) {
    if (need_read) {
      pool = PLUMB_TRY(load(s));
      need_read = false;
      if (pool) {
        if (auto held = holding(*pool, who)) return Claimed{PLUMB_TRY(keep_held(s, who, *held, want)), false};
      }
    }
    auto cand = PLUMB_TRY(candidate(s, pool ? &*pool : nullptr, taken, want, origin));
    Write w = PLUMB_TRY(put_slot(s, pool ? &*pool : nullptr, cand, who));
    if (w == Write::Won) {
      const IpAddr base = pool ? pool->range.addr : s.range.addr;
      if (PLUMB_TRY(reserve_or_release(s, base, cand, who))) return Claimed{cand, true};
      taken.insert(to_u128(cand));  // another range holds it: try another
      if (want) return fail(cni_code::kIpamExhausted, want_taken(s, *want, "reserved by another range (OverlappingRangeIPReservation)"));
      continue;
    }
    if (w == Write::Lost) {
      ++ipam.stats_.conflicts;
      taken.insert(to_u128(cand));
      origin = rng();  // fall out of step with whoever won
    }
    need_read = w == Write::Gone || want.has_value() || ++lost % kRereadEvery == 0;
  }
  return fail(cni_code::kTryAgainLater, pool_what(s) + ": no address could be allocated in " + std::to_string(kMaxWrites) +
                                            " writes: other writers kept taking the candidates");
}

std::optional<IpAddr> KubeClusterIpam::Impl::holding(const wb::IpPool& pool, const Who& who) const {
  for (const auto& [off, a] : pool.allocations) {
    if (who.holds(a)) return pool.at(off);
  }
  return std::nullopt;
}

Result<IpAddr> KubeClusterIpam::Impl::keep_held(const Site& s, const Who& who, const IpAddr& held,
                                                const std::optional<IpAddr>& want) {
  if (want && *want != held) {
    return fail(cni_code::kConflict, pool_what(s) + ": " + who.str() + " already holds " + held.str() + "; requested IP " +
                                         want->str() + " not given");
  }
  // Held already (an IPAMClaim's address on its next pod, or an ADD repeated after plumb lost
  // its record): its reservation must be there too, and must be its own.
  if (ipam.cfg_.overlapping_ranges && !PLUMB_TRY(reserve(held, who))) {
    return fail(cni_code::kConflict, pool_what(s) + ": " + who.str() + " holds " + held.str() +
                                         ", but another range's OverlappingRangeIPReservation holds that address");
  }
  return held;
}

std::string KubeClusterIpam::Impl::want_taken(const Site& s, const IpAddr& want, const std::string& by) const {
  return pool_what(s) + ": requested IP " + want.str() + " is already allocated (" + by + ")";
}

Result<IpAddr> KubeClusterIpam::Impl::candidate(const Site& s, const wb::IpPool* pool, const std::set<u128>& taken,
                                                const std::optional<IpAddr>& want, u128 origin) const {
  if (want) {
    if (!s.pool.allocatable(*want)) {
      return fail(cni_code::kIpamExhausted, pool_what(s) + ": requested IP " + want->str() + " cannot be handed out here");
    }
    if (pool != nullptr) {
      auto it = pool->allocations.find(pool->offset_of(*want));
      if (to_u128(*want) >= to_u128(pool->range.addr) && it != pool->allocations.end()) {
        const auto& a = it->second;
        return fail(cni_code::kIpamExhausted, want_taken(s, *want, "container " + a.id + " interface " + a.ifname +
                                                                       (a.podref.empty() ? "" : " pod " + a.podref)));
      }
    }
    return *want;
  }
  wb::IpPool empty;
  empty.range = s.range;
  auto a = next_free(s, pool != nullptr ? *pool : empty, taken, origin);
  if (!a) return fail(cni_code::kIpamExhausted, pool_what(s) + ": pool exhausted: no free address left");
  return *a;
}

Result<bool> KubeClusterIpam::Impl::reserve_or_release(const Site& s, const IpAddr& base, const IpAddr& a, const Who& who) {
  if (!ipam.cfg_.overlapping_ranges) return true;
  auto r = reserve(a, who);
  if (r && *r) return true;
  auto st = release_slot(s, base, a, who);  // the slot goes back before anything else happens
  if (!r) return std::unexpected(r.error());
  if (!st) return std::unexpected(st.error());
  return false;
}

Result<bool> KubeClusterIpam::Impl::reserve(const IpAddr& a, const Who& who) {
  const std::string name = wb::reservation_name(a, ipam.cfg_.network_name);
  const std::string what = ipam.cfg_.type + ": OverlappingRangeIPReservation " + ipam.ns_ + "/" + name;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto w = PLUMB_TRY(send("POST", wb::reservations_path(ipam.ns_), wb::encode_reservation(ipam.ns_, name, who.allocation()),
                            k8s::kJson, "create " + what));
    if (w == Write::Won) return true;
    auto got = PLUMB_TRY(ipam.client_->get(wb::reservations_path(ipam.ns_, name), "read " + what));
    if (!got) continue;  // deleted meanwhile: create it again
    auto r = PLUMB_TRY(wb::decode_reservation(*got, what));
    return who.owns(r);
  }
  return fail(cni_code::kTryAgainLater, what + " kept appearing and disappearing");
}

Status KubeClusterIpam::Impl::unreserve(const IpAddr& a, const Who& who) {
  const std::string name = wb::reservation_name(a, ipam.cfg_.network_name);
  const std::string what = ipam.cfg_.type + ": OverlappingRangeIPReservation " + ipam.ns_ + "/" + name;
  const std::string path = wb::reservations_path(ipam.ns_, name);
  auto got = PLUMB_TRY(ipam.client_->get(path, "read " + what));
  if (!got) return {};
  auto r = PLUMB_TRY(wb::decode_reservation(*got, what));
  if (!who.owns(r)) return {};  // someone else's now
  auto w = PLUMB_TRY(send("DELETE", path, wb::delete_preconditions(r.uid, r.resource_version), k8s::kJson, "delete " + what));
  (void)w;  // Lost (409: re-created meanwhile) and Gone are someone else's business
  return {};
}

Result<KubeClusterIpam::Impl::Released> KubeClusterIpam::Impl::release(
    const Site& s, const std::string& who, const std::function<bool(const wb::Allocation&)>& match) {
  for (int attempt = 0; attempt < kMaxReleases; ++attempt) {
    auto pool = PLUMB_TRY(load(s));
    if (!pool) return Released{};
    std::vector<std::pair<u128, std::string>> slots;
    Released out;
    for (const auto& [off, a] : pool->allocations) {
      if (match(a)) {
        slots.emplace_back(off, a.id);
        out.emplace_back(pool->at(off), a);
      }
    }
    if (slots.empty()) return out;
    auto w = PLUMB_TRY(send("PATCH", wb::pools_path(ipam.ns_, s.name), wb::release_patch(slots), k8s::kJsonPatch,
                            "release the addresses of " + who + " in " + pool_what(s)));
    if (w == Write::Gone) return Released{};
    if (w == Write::Won) return out;
    ++ipam.stats_.conflicts;
  }
  return fail(cni_code::kTryAgainLater, pool_what(s) + ": the release of " + who + " kept losing to other writers (" +
                                            std::to_string(kMaxReleases) + " attempts)");
}

Result<std::vector<Site>> KubeClusterIpam::Impl::sites(const Request& req, bool assign) {
  const Config& cfg = ipam.cfg_;
  std::vector<Site> out;
  if (!cfg.node_slice_len) {
    for (const Pool& p : cfg.pools) out.push_back(Site{p, p.subnet, wb::pool_name(cfg.network_name, "", p.subnet), p.subnet.len});
    return out;
  }
  const std::string slice_pool = cfg.network_name.empty() ? req.network_name : cfg.network_name;
  auto slice = PLUMB_TRY(node_slice(slice_pool, assign));
  if (!slice) return out;  // this node has no slice: it holds nothing
  out.push_back(kube::slice_site(cfg.pools[0], *slice, cfg.network_name, ipam.node_));
  return out;
}

Result<cni::CniResult> KubeClusterIpam::Impl::add(const Request& req) {
  auto [id, ifname] = PLUMB_TRY(internal::identity(req, ipam.cfg_.type, true));
  Who who{id, ifname, req.owner.empty() ? internal::pod_ref_of(req) : std::string()};
  auto want = PLUMB_TRY(internal::requested(req, ipam.cfg_));
  auto all = PLUMB_TRY(sites(req, true));
  cni::CniResult out;
  std::vector<std::pair<size_t, IpAddr>> fresh;  // what this ADD took, for the rollback
  for (size_t i = 0; i < all.size(); ++i) {
    auto got = claim(all[i], who, want[i]);
    if (!got) {
      for (auto& [j, a] : fresh) {  // all or nothing: what the ranges before took goes back
        (void)release(all[j], who.str(), [&](const wb::Allocation& x) { return who.holds(x); });
        if (ipam.cfg_.overlapping_ranges) (void)unreserve(a, who);
      }
      return std::unexpected(got.error());
    }
    if (got->fresh) fresh.emplace_back(i, got->addr);
    const Pool& p = ipam.cfg_.pools[i];
    out.ips.push_back(cni::IpConfig{IpPrefix{got->addr, all[i].result_len}, p.gateway, std::nullopt});
  }
  out.routes = ipam.cfg_.routes;
  out.dns = ipam.cfg_.dns;
  return out;
}

Status KubeClusterIpam::Impl::del(const Request& req) {
  auto [id, ifname] = PLUMB_TRY(internal::identity(req, ipam.cfg_.type, false));
  if (ifname.empty()) return {};  // allocations are per interface: nothing can be named
  const Who who{id, ifname, req.owner.empty() ? internal::pod_ref_of(req) : std::string()};
  for (const Site& s : PLUMB_TRY(sites(req, false))) {
    auto gone = PLUMB_TRY(release(s, who.str(), [&](const wb::Allocation& a) { return who.releases(a); }));
    if (!ipam.cfg_.overlapping_ranges) continue;
    for (const auto& [a, alloc] : gone) PLUMB_TRY(unreserve(a, who));
  }
  return {};
}

Status KubeClusterIpam::Impl::check(const Request& req, const cni::CniResult& prev) {
  auto [id, ifname] = PLUMB_TRY(internal::identity(req, ipam.cfg_.type, true));
  const Who who{id, ifname, {}};
  std::vector<IpAddr> held;
  for (const Site& s : PLUMB_TRY(sites(req, false))) {
    auto pool = PLUMB_TRY(load(s));
    if (auto a = pool ? holding(*pool, who) : std::nullopt) held.push_back(*a);
  }
  if (held.empty()) return fail(cni_code::kNotFound, ipam.cfg_.type + ": " + who.str() + " holds no address in its IPPools");
  for (const auto& ip : prev.ips) {
    if (std::find(held.begin(), held.end(), ip.address.addr) == held.end()) {
      return fail(cni_code::kNotFound, ipam.cfg_.type + ": " + ip.address.addr.str() + " is not held by " + who.str());
    }
  }
  return {};
}

Status KubeClusterIpam::Impl::gc(const Request& req, const KeepFn& keep) {
  if (!ipam.cfg_.node_slice_len) return {};  // shared pools name no node: the reconciler's job
  for (const Site& s : PLUMB_TRY(sites(req, false))) {
    auto gone = PLUMB_TRY(release(s, "GC of node " + ipam.node_, [&](const wb::Allocation& a) {
      return !a.id.empty() && !std::string_view(a.id).starts_with(kClaimOwnerPrefix) && !keep(a.id, a.ifname);
    }));
    if (!ipam.cfg_.overlapping_ranges) continue;
    for (const auto& [a, alloc] : gone) PLUMB_TRY(unreserve(a, Who{alloc.id, alloc.ifname, alloc.podref}));
  }
  return {};
}

uint64_t KubeClusterIpam::Impl::rng() {
  if (!rng_) {
    auto seed = text::fnv1a64(ipam.node_) ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    rng_.emplace(seed);
  }
  return (*rng_)();
}

// ---- the Ipam ------------------------------------------------------------------------------------

KubeClusterIpam::KubeClusterIpam(Config cfg, std::string node, std::shared_ptr<k8s::Client> client, std::string ns)
    : cfg_(std::move(cfg)), node_(std::move(node)), ns_(std::move(ns)), client_(std::move(client)) {}
KubeClusterIpam::~KubeClusterIpam() = default;

namespace {
/// Runs `f` with a fresh Impl, measuring its requests into `stats`.
template <class F>
auto measured(KubeClusterIpam::Impl&& im, KubeStats& stats, const k8s::Client& client, F&& f) {
  stats = {};
  const uint64_t start = client.attempts();
  auto r = f(im);
  stats.requests = client.attempts() - start;
  return r;
}
}  // namespace

Result<cni::CniResult> KubeClusterIpam::add(const Request& req) {
  return measured(Impl(*this), stats_, *client_, [&](Impl& im) { return im.add(req); });
}
Status KubeClusterIpam::del(const Request& req) {
  return measured(Impl(*this), stats_, *client_, [&](Impl& im) { return im.del(req); });
}
Status KubeClusterIpam::check(const Request& req, const cni::CniResult& prev) {
  return measured(Impl(*this), stats_, *client_, [&](Impl& im) { return im.check(req, prev); });
}
Status KubeClusterIpam::gc(const Request& req, const KeepFn& keep) {
  return measured(Impl(*this), stats_, *client_, [&](Impl& im) { return im.gc(req, keep); });
}

std::unique_ptr<KubeClusterIpam> make_kube(Config cfg, const std::string& node, std::shared_ptr<k8s::Client> client,
                                           const std::string& ns) {
  std::string where = ns;
  if (where.empty()) where = client->credentials().namespace_;
  if (where.empty()) where = kDefaultPoolNamespace;
  return std::make_unique<KubeClusterIpam>(std::move(cfg), node, std::move(client), where);
}

Result<std::unique_ptr<KubeClusterIpam>> make_kube(Config cfg, const std::string& node, const ClusterAccess* access) {
  std::optional<k8s::Credentials> creds;
  if (access != nullptr) creds = PLUMB_TRY(k8s::configured(access->kubeconfig));
  if (!creds && !cfg.kubeconfig.empty()) {
    auto c = k8s::load_kubeconfig(cfg.kubeconfig);
    if (!c) return std::unexpected(c.error().within("ipam.kubernetes.kubeconfig"));
    creds = std::move(*c);
  }
  if (!creds) {
    return fail(cni_code::kInvalidConfig,
                cfg.type + ": the pool lives in the Kubernetes API (no etcd_host), but plumb has no API credentials: set "
                           "plumb's kubeconfig, run in-cluster, set ipam.kubernetes.kubeconfig, or give etcd_host");
  }
  k8s::Options opts = access != nullptr ? access->api : k8s::Options{};
  auto client = k8s::client_for(std::move(*creds), opts);  // kept in a daemon worker
  return make_kube(std::move(cfg), node, std::move(client), access != nullptr ? access->pool_namespace : std::string());
}

}  // namespace plumb::ipam::cluster
