// IP address management behind one interface: host-local (on-disk compatible with the reference
// plugin) and static. A driver hands an attachment's "ipam" object to make() and calls
// add()/del()/check() on what it gets.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/cni/cni.hpp"
#include "engine/common/json.hpp"
#include "engine/common/result.hpp"

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
};

class Ipam {
 public:
  virtual ~Ipam() = default;
  /// Allocates (or, for a repeated ADD of the same container+ifname, returns the addresses it
  /// already holds) and returns ips (interface index unset), routes and dns.
  /// Requested IPs come from runtimeConfig.ips, args.cni.ips or CNI_ARGS IP= (comma separated).
  /// Errors: kIpamExhausted naming the range when full or a requested IP is taken/outside every
  /// range; kInvalidConfig naming the field for bad config.
  [[nodiscard]] virtual Result<cni::CniResult> add(const Request& req) = 0;
  /// Releases everything held for container_id+ifname. Nothing held is not an error.
  [[nodiscard]] virtual Status del(const Request& req) = 0;
  /// Verifies the container still holds the addresses in `prev` (CHECK). Errors name the address.
  [[nodiscard]] virtual Status check(const Request& req, const cni::CniResult& prev) = 0;
};

/// Builds the IPAM named by ipam.type: "host-local" or "static". Parses and validates the whole
/// config now (ranges, gateways, routes, addresses). Errors: kInvalidConfig naming the field and
/// value; an unknown type is kInvalidConfig naming it.
[[nodiscard]] Result<std::unique_ptr<Ipam>> make(const json::Value& ipam);

}  // namespace plumb::ipam
