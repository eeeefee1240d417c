// IP address management behind one interface: host-local (on-disk compatible with the reference
// plugin) and static. A driver hands an attachment's "ipam" object to make() and calls
// add()/del()/check() on what it gets.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/spawn.hpp"
#include "engine/cni/cni.hpp"
#include "engine/cni/delegate.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/k8s/client.hpp"

namespace plumb::ipam {

/// Everything an IPAM may use for one attachment.
struct Request {
  std::string container_id;                 // CNI_CONTAINERID
  std::string ifname;                       // CNI_IFNAME of the attachment
  std::string network_name;                 // the network's CNI "name"
  const json::Value* ipam = nullptr;        // the config's "ipam" object (never null for make())
  const json::Value* runtime_config = nullptr;  // canonicalised runtimeConfig, may be null
  const json::Value* args = nullptr;        // the config's "args" object, may be null
  std::vector<std::pair<std::string, std::string>> cni_args;  // CNI_ARGS pairs (IP=, MAC=, ...)
  /// Allocation owner override (IPAMClaims, spec 8): addresses held by this id (e.g.
  /// "ipamclaim:<ns>/<name>") instead of container_id+ifname, so a claim keeps its addresses
  /// across pods. add()/check() hold and verify the owner's addresses; del() releases
  /// claim-held addresses only when it is set (GC of a deleted claim): a pod's DEL, which
  /// leaves it empty, leaves them alone.
  std::string owner = {};
  /// The owner's addresses to re-use ("192.0.2.5/24": the claim's status.ips), requested first.
  std::vector<std::string> owner_ips = {};  // (initialised: brace-initialisations stay warning-free)
  /// add(): the caller knows container_id+ifname holds no address of this network yet (plumb's
  /// write-ahead records: an attachment being added whose earlier remains were torn down), so
  /// host-local skips the look-up of addresses already held (the reference's GetByID, which reads
  /// every allocation file of the network) and allocates from last_reserved_ip at once. False:
  /// the look-up runs (a repeated ADD returns what is held), as the reference does.
  bool first_allocation = false;
  /// del(): the addresses the attachment was given (its recorded result). host-local removes
  /// their files (when they name this container and interface) and reads no other file when
  /// every configured range set had one of them; otherwise, or when empty, it looks at every
  /// allocation file as the reference's ReleaseByID does.
  std::vector<IpAddr> held = {};
  // A delegated IPAM (delegated_type() not empty) runs with the CNI IPAM delegation protocol:
  const json::Value* network_config = nullptr;  ///< the whole plugin config, its stdin
  std::string netns = {};                       ///< CNI_NETNS
  /// Called once its process is started, before it gets its config (write-ahead record).
  std::function<Status(const process::Child&)> on_delegate_started = {};
};

class Ipam {
 public:
  virtual ~Ipam() = default;
  /// Allocates (or, for a repeated ADD of the same container+ifname, returns the addresses it
  /// already holds) and returns ips (interface index unset), routes and dns.
  /// Requested IPs come from runtimeConfig.ips, args.cni.ips or CNI_ARGS IP= (comma separated;
  /// the cluster IPAM reads CNI_ARGS IP= as whereabouts does: static addresses).
  /// Errors: kIpamExhausted naming the range when full or a requested IP is taken/outside every
  /// range; kInvalidConfig naming the field for bad config.
  [[nodiscard]] virtual Result<cni::CniResult> add(const Request& req) = 0;
  /// Releases everything held for container_id+ifname. Nothing held is not an error.
  [[nodiscard]] virtual Status del(const Request& req) = 0;
  /// Verifies the container still holds the addresses in `prev` (CHECK). Errors name the address.
  [[nodiscard]] virtual Status check(const Request& req, const cni::CniResult& prev) = 0;

  /// Whether this IPAM can hold addresses for Request::owner (IPAMClaims, spec 8): host-local
  /// and the cluster IPAM (both datastores).
  [[nodiscard]] virtual bool supports_owner() const { return false; }
  /// The plugin type this IPAM delegates to (ipam/delegated.cpp); "" for plumb's own IPAMs.
  [[nodiscard]] virtual std::string delegated_type() const { return {}; }

  /// GC's question about one allocation owner (container ID, ifname): true = still in use.
  using KeepFn = std::function<bool(const std::string& container_id, const std::string& ifname)>;
  /// CNI GC for IPAMs whose allocations live beyond this node's records (cluster pools):
  /// releases what this node holds for owners `keep` rejects. req gives network_name and ipam
  /// (container_id/ifname unused). Default: nothing to do (host-local, static).
  [[nodiscard]] virtual Status gc(const Request& req, const KeepFn& keep) {
    (void)req;
    (void)keep;
    return {};
  }
};

/// How plumb's cluster IPAM reaches the Kubernetes API for whereabouts' pools: with plumb's own
/// credentials (its config's kubeconfig, else the in-cluster service account), never a second
/// set of its own. Plain settings: nothing is read or connected until an IPAM needs it.
struct ClusterAccess {
  std::string kubeconfig;      ///< plumb config kubeconfig; "" = in-cluster when KUBERNETES_SERVICE_HOST is set
  k8s::Options api;            ///< apiTimeoutSeconds, apiRetries
  std::string pool_namespace;  ///< plumb config whereaboutsNamespace; "" = the credentials' namespace, else kube-system
};

/// Builds the IPAM named by ipam.type: "host-local", "static", or the cluster IPAM on etcd
/// ("whereabouts", "plumb-cluster"; ipam/cluster.hpp: etcd, or whereabouts' IPPools through
/// `cluster`). Parses and validates the whole config now (ranges, gateways, routes, addresses)
/// and loads the credentials a Kubernetes pool needs (no request is made). Any other type is
/// delegated (CNI IPAM delegation, ipam/delegated.cpp) when `search` is given: its binary must
/// exist now. Errors: kInvalidConfig naming the field and value (also a Kubernetes pool without
/// credentials); an unknown type without `search` is kInvalidConfig naming it; kNotFound naming
/// a delegated type and the directories searched.
[[nodiscard]] Result<std::unique_ptr<Ipam>> make(const json::Value& ipam, const cni::PluginSearch* search = nullptr,
                                                 const ClusterAccess* cluster = nullptr);
/// True for the IPAM types plumb implements itself (make() without a search builds them).
[[nodiscard]] bool implemented(std::string_view type);

}  // namespace plumb::ipam
