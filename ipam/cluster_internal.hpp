// Internals shared by the cluster IPAM's files (cluster.cpp: allocation; cluster_config.cpp:
// config, requested addresses, key layout). Not part of the IPAM's interface.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipam/cluster.hpp"

namespace plumb::ipam::cluster::internal {

/// Addresses as 128-bit integers, so ranges are arithmetic.
using u128 = unsigned __int128;

/// `a` as a big-endian integer (IPv4: the low 32 bits).
inline u128 to_u128(const IpAddr& a) {
  u128 v = 0;
  for (size_t i = 0; i < a.size(); ++i) v = (v << 8) | a.bytes[i];
  return v;
}

/// The address of `family` whose integer is `v` (inverse of to_u128).
inline IpAddr from_u128(int family, u128 v) {
  IpAddr a;
  a.family = family;
  size_t n = family == AF_INET ? 4 : 16;
  for (size_t i = n; i-- > 0;) {
    a.bytes[i] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
  return a;
}

/// Requested addresses (IPAMClaim status.ips, args.cni.ips, runtimeConfig.ips; not CNI_ARGS IP=,
/// which whereabouts reads as a static address: static_addresses), one
/// slot per pool of `cfg` (nullopt: none requested there). Errors: kIpamExhausted naming the
/// address when it is outside every range, excluded, or a second address for one range;
/// kInvalidConfig for a malformed address.
[[nodiscard]] Result<std::vector<std::optional<IpAddr>>> requested(const Request& req, const Config& cfg);

/// The ifname of IPAMClaim-owned allocations: a claim's addresses follow the claim whatever
/// interface the pod gives them.
inline constexpr std::string_view kClaimIfname = "claim";

/// Whom an allocation belongs to: (container ID, ifname), or for an IPAMClaim the owner id
/// (Request::owner) and kClaimIfname. `need_ifname`: CNI_IFNAME must be valid (add/check; del
/// takes what it gets). Errors: kInvalidEnv for an empty or malformed CNI_CONTAINERID/CNI_IFNAME.
[[nodiscard]] Result<std::pair<std::string, std::string>> identity(const Request& req, const std::string& type,
                                                                   bool need_ifname);

/// whereabouts' default flat-file configurations, searched in this order after the NAD's
/// "configuration_path" (pkg/config GetFlatIPAM).
inline const std::vector<std::string> kFlatFiles = {"/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf",
                                                    "/etc/cni/net.d/whereabouts.d/whereabouts.conf",
                                                    "/host/etc/cni/net.d/whereabouts.d/whereabouts.conf"};

/// `ipam` merged with whereabouts' flat-file configuration: the first existing file of
/// ipam.configuration_path, then `defaults`, is a JSON "ipam" object whose keys fill what the NAD
/// leaves unset (absent, null, "", false, 0, empty; objects such as "kubernetes" member by
/// member), "enable_overlapping_ranges" excepted (mergo.Merge as whereabouts calls it). No file:
/// `ipam` unchanged. Errors: kIo/kDecode/kInvalidConfig naming the file that exists but cannot
/// be read or is not a JSON object.
[[nodiscard]] Result<json::Document> with_flat_file(const json::Value& ipam, const std::vector<std::string>& defaults);

/// whereabouts' "addresses": [{"address": "CIDR", "gateway": "IP"}] (static addresses every result
/// gets). Errors: kInvalidConfig naming the entry (not a CIDR, bad gateway).
[[nodiscard]] Result<std::vector<cni::IpConfig>> parse_addresses(const json::Value& ipam);

/// The static addresses of one request, as whereabouts' handleEnvArgs: `configured`, then each
/// CIDR of CNI_ARGS IP= (comma-separated, prefix required); each address of CNI_ARGS GATEWAY=
/// (comma-separated) becomes the gateway of every static address whose subnet holds it.
/// Errors: kInvalidConfig naming CNI_ARGS IP or GATEWAY and the value.
[[nodiscard]] Result<std::vector<cni::IpConfig>> static_addresses(const Request& req, const std::vector<cni::IpConfig>& configured);

/// `pool` (the cluster IPAM of either datastore) with the static addresses: ADD appends
/// static_addresses() to the pool's result; CHECK leaves them out of what it asks the pool.
[[nodiscard]] std::unique_ptr<Ipam> with_statics(std::unique_ptr<Ipam> pool, std::vector<cni::IpConfig> configured);

/// "<K8S_POD_NAMESPACE, default "default">/<K8S_POD_NAME>", or "" without a pod name.
[[nodiscard]] std::string pod_ref_of(const Request& req);

}  // namespace plumb::ipam::cluster::internal
