// Internals of the Kubernetes datastore shared by its files (cluster_kube.cpp: allocation and
// release; cluster_kube_slices.cpp: node slices). Not part of the IPAM's interface.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ipam/cluster_kube.hpp"

namespace plumb::ipam::cluster {

namespace wb = whereabouts;

namespace kube {

/// Whom an allocation is for.
struct Who {
  std::string id;      // container ID or IPAMClaim owner
  std::string ifname;  // CNI_IFNAME, or "claim" for IPAMClaim owners
  std::string podref;  // "<ns>/<pod>"; "" for IPAMClaim owners

  [[nodiscard]] wb::Allocation allocation() const { return {id, podref, ifname}; }
  /// The allocation is this attachment's (a repeated ADD gets it back).
  [[nodiscard]] bool holds(const wb::Allocation& a) const { return a.id == id && a.ifname == ifname; }
  /// DEL releases it: this attachment's, or one of this container an old whereabouts wrote
  /// without an ifname.
  [[nodiscard]] bool releases(const wb::Allocation& a) const { return a.id == id && (a.ifname == ifname || a.ifname.empty()); }
  /// The reservation is this attachment's: plumb writes the container ID; whereabouts leaves it
  /// out, so its reservations are matched by pod and interface.
  [[nodiscard]] bool owns(const wb::Reservation& r) const {
    if (!r.container_id.empty()) return r.container_id == id;
    return !podref.empty() && r.podref == podref && r.ifname == ifname;
  }
  [[nodiscard]] std::string str() const {
    return "container " + id + " interface " + ifname + (podref.empty() ? "" : " (pod " + podref + ")");
  }
};

/// One IPPool a request uses.
struct Site {
  Pool pool;           // what may be handed out here (the config's range, within the node's slice)
  IpPrefix range;      // the object's spec.range (network form)
  std::string name;    // the IPPool's name
  uint8_t result_len;  // prefix length of the addresses handed out (the config's subnet)
};

/// The site of the node slice `slice` of `pool`: its IPPool, the slice's first to last usable
/// address within the configured range.
[[nodiscard]] Site slice_site(const Pool& pool, const IpPrefix& slice, const std::string& network_name,
                              const std::string& node);

}  // namespace kube

/// One request's work on the API server (the methods of KubeClusterIpam run one each).
struct KubeClusterIpam::Impl {
  explicit Impl(KubeClusterIpam& i) : ipam(i) {}

  enum class Write { Won, Lost, Gone };  // 2xx; 422/409 (a test failed, AlreadyExists); 404
  struct Claimed {
    IpAddr addr;
    bool fresh = false;  // taken by this request (not held before)
  };
  using Released = std::vector<std::pair<IpAddr, wb::Allocation>>;

  Result<cni::CniResult> add(const Request& req);
  Status del(const Request& req);
  Status check(const Request& req, const cni::CniResult& prev);
  Status gc(const Request& req, const KeepFn& keep);

  /// The IPPools of a request: one per range, or the node's slice (`assign`: take one if the
  /// node has none; else no slice means no site).
  Result<std::vector<kube::Site>> sites(const Request& req, bool assign);
  /// The node's slice from NodeSlicePool `name` (cluster_kube_slices.cpp).
  Result<std::optional<IpPrefix>> node_slice(const std::string& name, bool assign);

  Result<std::optional<wb::IpPool>> load(const kube::Site& s);
  Result<Write> send(std::string_view method, const std::string& path, const std::string& body, std::string_view type,
                     const std::string& what);
  Result<Write> put_slot(const kube::Site& s, const wb::IpPool* pool, const IpAddr& a, const kube::Who& who);
  Status release_slot(const kube::Site& s, const IpAddr& base, const IpAddr& a, const kube::Who& who);
  Result<Claimed> claim(const kube::Site& s, const kube::Who& who, const std::optional<IpAddr>& want);
  Result<IpAddr> candidate(const kube::Site& s, const wb::IpPool* pool, const std::set<wb::u128>& taken,
                           const std::optional<IpAddr>& want, wb::u128 origin) const;
  Result<bool> reserve_or_release(const kube::Site& s, const IpAddr& base, const IpAddr& a, const kube::Who& who);
  Result<bool> reserve(const IpAddr& a, const kube::Who& who);
  Status unreserve(const IpAddr& a, const kube::Who& who);
  Result<Released> release(const kube::Site& s, const std::string& who,
                           const std::function<bool(const wb::Allocation&)>& match);

  [[nodiscard]] std::optional<IpAddr> holding(const wb::IpPool& pool, const kube::Who& who) const;
  /// An address `who` holds already: the requested one (if any) and reserved for it.
  Result<IpAddr> keep_held(const kube::Site& s, const kube::Who& who, const IpAddr& held, const std::optional<IpAddr>& want);
  [[nodiscard]] std::string want_taken(const kube::Site& s, const IpAddr& want, const std::string& by) const;
  [[nodiscard]] std::string pool_what(const kube::Site& s) const;
  uint64_t rng();

  KubeClusterIpam& ipam;
  std::optional<std::mt19937_64> rng_;
};

}  // namespace plumb::ipam::cluster
