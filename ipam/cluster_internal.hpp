// Internals shared by the cluster IPAM's files (cluster.cpp: allocation; cluster_config.cpp:
// config, requested addresses, key layout). Not part of the IPAM's interface.
#pragma once

#include <sys/socket.h>

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

/// Requested addresses (IPAMClaim status.ips, CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips), one
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

/// "<K8S_POD_NAMESPACE, default "default">/<K8S_POD_NAME>", or "" without a pod name.
[[nodiscard]] std::string pod_ref_of(const Request& req);

}  // namespace plumb::ipam::cluster::internal
