// Cluster-wide IPAM: one pool shared by every node, allocated with compare-and-swap and no
// global lock, kept where whereabouts keeps it: its IPPool objects in the Kubernetes API
// (ipam/cluster_kube.hpp; whereabouts' default, used when no etcd key is set) or in etcd (this
// file). Served for "type": "whereabouts" (its config keys, so existing NADs move over unchanged)
// and "type": "plumb-cluster".
//
// Config (the "ipam" object; whereabouts' names):
//   range          "192.0.2.0/24" or "192.0.2.10-192.0.2.20/24" (start-end/prefix)
//   range_start, range_end, exclude ([CIDR...]) refine "range"
//   ipRanges       [{range, range_start, range_end, exclude}, ...]: one address per entry (dual
//                  stack = one IPv4 and one IPv6 entry); "range" is the first entry
//   gateway, routes, dns   returned with the addresses (the gateway is never allocated)
//   network_name   names the pool; without it every NAD shares the pool "_default", as
//                  whereabouts shares pools by range: overlapping ranges never hand out one
//                  address twice
//   etcd_host ("host:port" or URL, comma separated), etcd_endpoints ([URL...]),
//   etcd_ca_cert_file, etcd_cert_file, etcd_key_file, etcd_username, etcd_password
//   etcd_retry_timeout_ms (plumb's): budget for one etcd operation (default 10000)
//   datastore      "kubernetes" or "etcd"; default: etcd when etcd endpoints are given
//   enable_overlapping_ranges (default true), node_slice_size ("/28"), kubernetes.kubeconfig:
//                  the Kubernetes datastore's (ipam/cluster_kube.hpp)
// Accepted and ignored (plumb needs no leader and logs as plumb does): leader_lease_duration,
// leader_renew_deadline, leader_retry_period, sleep_for_race, log_file, log_level,
// configuration_path, reconciler_cron_expression, kubernetes.k8s_api_root.
//
// Storage (etcd keys):
//   /plumb/ipam/<pool>/<ip>                      {containerID, ifname, podRef, node, time}
//   /plumb/owners/<pool>/<containerID>/<ifname>  the same plus ips ["a/len", ...]
//   /plumb/cursors/<pool>/<node>                 {"<range>": "<last address given>", ...}
// <ip> is fixed width (IPv4 "192.000.002.007", IPv6 eight 4-digit hex groups) so that key order
// is address order and a window of addresses is one range read.
//
// Allocation: all addresses of one attachment and its owner key are claimed in ONE transaction
// whose compares require every key to be absent (create_revision == 0): all or nothing. A failed
// compare marks the taken candidates and retries with others (bounded). Candidates come from a
// window read (keys only) starting after this node's cursor, or at a per-node hash offset the
// first time, so nodes start apart; windows double (64 .. 4096 addresses) while full, so an
// exhausted /16 costs about 30 reads, a free one 1. ADD repeated for the same container+ifname
// returns the owner key's addresses. Release deletes an address only while it still holds this
// owner (compare mod_revision). The node is $NODE_NAME, else the host name.
//
// IPAMClaims (spec 8), as host-local: with Request::owner set, the
// addresses belong to that owner ("ipamclaim:<ns>/<name>", owner key ifname "claim") instead
// of container+ifname, so the pod's DEL leaves them and the next pod naming the claim gets them;
// Request::owner_ips are requested; del() with Request::owner releases them; GC never does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cni/cni.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "ipam/etcd_client.hpp"
#include "ipam/ipam.hpp"

namespace plumb::ipam::cluster {

/// One entry of ipRanges: the addresses [start, end] of subnet, minus exclude and the gateway
/// (and, for IPv4, the network and broadcast addresses).
struct Pool {
  IpPrefix subnet;                   // host bits zero
  IpAddr start;                      // first address handed out, inclusive
  IpAddr end;                        // last address handed out, inclusive
  std::vector<IpPrefix> exclude;     // never handed out
  std::optional<IpAddr> gateway;     // the config's gateway when inside subnet

  /// True if `a` may be handed out from this pool.
  [[nodiscard]] bool allocatable(const IpAddr& a) const;
  /// True if `a` lies in [start, end] (same family).
  [[nodiscard]] bool contains(const IpAddr& a) const;
  /// "192.0.2.0/28 (192.0.2.1-192.0.2.14)".
  [[nodiscard]] std::string str() const;
};

/// Where a pool lives: whereabouts' IPPool objects in the Kubernetes API (whereabouts' default,
/// ipam/cluster_kube.hpp), or plumb's keys in etcd (this file).
enum class Datastore { Kubernetes, Etcd };

/// The validated "ipam" object.
struct Config {
  std::string type;                   // "whereabouts" or "plumb-cluster" (for messages)
  std::vector<Pool> pools;            // "range" first, then ipRanges, in order
  std::string pool_name = "_default"; // network_name
  std::optional<IpAddr> gateway;
  std::vector<cni::RouteEntry> routes;
  cni::Dns dns;
  etcd::Options etcd;
  Datastore datastore = Datastore::Kubernetes;  // etcd when etcd_host/etcd_endpoints are set
  std::string network_name;         // network_name as written ("" = unnamed: IPPool names carry no prefix)
  bool overlapping_ranges = true;   // enable_overlapping_ranges (whereabouts' default: on)
  std::string node_slice_size;      // node_slice_size as written ("" = no node slices)
  std::optional<unsigned> node_slice_len;  // node_slice_size as a prefix length
  std::string kubeconfig;           // kubernetes.kubeconfig: used only when plumb itself has no API credentials
  std::vector<cni::IpConfig> addresses;  // addresses: whereabouts' static addresses, added to every result
};

/// Parses and validates the whole "ipam" object (keys in the file comment). Errors:
/// kInvalidConfig naming the field and value (bad CIDR, start after end, address outside the
/// subnet, overlapping entries, no range, datastore "etcd" without endpoint, cert without key,
/// node_slice_size that is not a prefix length inside the range or with several ranges).
[[nodiscard]] Result<Config> parse_config(const json::Value& ipam);

/// Fixed-width text of an address as used in keys ("192.000.002.007", "2001:0db8:0000:...").
[[nodiscard]] std::string key_text(const IpAddr& a);
/// Inverse of key_text. Errors: kDecode naming the text.
[[nodiscard]] Result<IpAddr> parse_key_text(std::string_view text);
/// "/plumb/ipam/<pool>/<key_text(ip)>".
[[nodiscard]] std::string ip_key(const std::string& pool, const IpAddr& ip);
/// "/plumb/ipam/<pool>/": every address key of a pool.
[[nodiscard]] std::string ip_prefix(const std::string& pool);
/// "/plumb/owners/<pool>/<containerID>/<ifname>".
[[nodiscard]] std::string owner_key(const std::string& pool, const std::string& container_id, const std::string& ifname);
/// "/plumb/owners/<pool>/".
[[nodiscard]] std::string owner_prefix(const std::string& pool);
/// "/plumb/cursors/<pool>/<node>".
[[nodiscard]] std::string cursor_key(const std::string& pool, const std::string& node);

/// The node name owners are recorded with (and node slices are assigned to): $NODE_NAME if set
/// and not empty, else whereabouts' $NODENAME, else the host name. Errors: kInvalidEnv when neither is usable or the name contains '/'.
[[nodiscard]] Result<std::string> node_name();

/// Owner id prefix of IPAMClaim-held allocations: GC never releases them.
inline constexpr std::string_view kClaimOwnerPrefix = "ipamclaim:";

/// What one add() cost (tests and the bench check the "no full scan" promise).
struct AddStats {
  uint64_t requests = 0;  // etcd HTTP requests made
  int claims = 0;         // claim transactions sent
  int windows = 0;        // window range reads
};

/// The cluster IPAM (see the file comment).
class ClusterIpam final : public Ipam {
 public:
  ClusterIpam(Config cfg, std::string node, etcd::Client client);

  /// Allocates one address per pool in one transaction, or returns what container_id+ifname
  /// already holds. Requested IPs (CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips) are claimed
  /// exactly. Errors: kIpamExhausted naming the range (nothing claimed), kIpamExhausted naming a
  /// requested address held by someone else, kTryAgainLater when etcd is unreachable (naming the
  /// endpoints) or contention outlasts the retries, kInvalidConfig for an auth failure.
  [[nodiscard]] Result<cni::CniResult> add(const Request& req) override;
  /// Releases every address container_id+ifname holds (only those still holding it) and its
  /// owner key, in one transaction. Nothing held is not an error. Errors: etcd unreachable.
  [[nodiscard]] Status del(const Request& req) override;
  /// Verifies container_id+ifname holds every address of prev (and something at all).
  [[nodiscard]] Status check(const Request& req, const cni::CniResult& prev) override;
  /// Releases allocations of this node whose owner `keep` rejects; IPAMClaim owners
  /// (kClaimOwnerPrefix) are kept. Every owner is tried; the first error is returned.
  [[nodiscard]] Status gc(const Request& req, const KeepFn& keep) override;
  [[nodiscard]] bool supports_owner() const override { return true; }

  /// One allocation owner of the pool as stored (the reconciler judges them one by one).
  struct OwnerEntry {
    std::string key;        // its owner key
    int64_t mod_revision = 0;
    std::string container_id;  // or an IPAMClaim owner ("ipamclaim:<ns>/<name>")
    std::string ifname;
    std::string pod_ref;    // "<ns>/<pod>", "" when unknown
    std::string node;       // the node that allocated
    std::vector<IpPrefix> ips;
  };
  /// Every owner of the pool (paged reads). Errors: etcd's.
  [[nodiscard]] Result<std::vector<OwnerEntry>> owners();
  /// Releases an owner listed by owners() and its addresses, only while its key is unchanged.
  [[nodiscard]] Status release_entry(const OwnerEntry& e);

  /// Releases `ip` if container_id+ifname holds it (and drops it from the owner's list).
  /// Errors: kConflict naming the holder when someone else holds it; absent is not an error.
  [[nodiscard]] Status release_address(const IpAddr& ip, const std::string& container_id, const std::string& ifname);

  [[nodiscard]] const AddStats& last_add_stats() const { return stats_; }
  [[nodiscard]] const Config& config() const { return cfg_; }
  [[nodiscard]] const std::string& node() const { return node_; }

 private:
  struct Owner;
  Result<cni::CniResult> from_owner(const Owner& o);
  /// Deletes an owner key and the address keys that still hold it; with expect_mod, only while
  /// the owner key is at that revision (GC: it was not re-created since it was listed).
  Status release_owner(const std::string& owner_key, int attempts, std::optional<int64_t> expect_mod = std::nullopt);

  Config cfg_;
  std::string node_;
  etcd::Client client_;
  AddStats stats_;
};

/// Builds the etcd datastore's cluster IPAM for `node` from its "ipam" object (no etcd request
/// is made). Errors: parse_config's; kInvalidConfig when the config names no etcd endpoint.
[[nodiscard]] Result<std::unique_ptr<ClusterIpam>> make(const json::Value& ipam, const std::string& node);

}  // namespace plumb::ipam::cluster

namespace plumb::ipam::detail {
/// make()'s entry for "whereabouts" and "plumb-cluster": the node from cluster::node_name(); the
/// Kubernetes datastore reached through `access` (null: only ipam.kubernetes.kubeconfig).
[[nodiscard]] Result<std::unique_ptr<Ipam>> make_cluster(const json::Value& ipam, const ClusterAccess* access);
}  // namespace plumb::ipam::detail
