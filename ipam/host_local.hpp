// Internals of ipam/: host-local's parsed configuration, ranges and allocation order (exposed so
// unit tests can check them without touching disk), and the helpers host-local and static share.
// Everything here follows the reference plugins (containernetworking/plugins plugins/ipam/
// host-local and plugins/ipam/static); deviations are noted where they occur.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/cni/cni.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "ipam/ipam.hpp"

namespace plumb::ipam {

/// One host-local range: a subnet and the inclusive slice [start, end] of it that is handed out.
/// Defaults as the reference: start = network + 1, end = last address (IPv4: broadcast - 1),
/// gateway = network + 1.
struct Range {
  IpPrefix subnet;  // host bits zero
  IpAddr start;     // first allocatable address, inclusive
  IpAddr end;       // last allocatable address, inclusive
  IpAddr gateway;   // never allocated

  /// True if `a` lies in [start, end] (same family). Gateway/network/broadcast are not excluded.
  [[nodiscard]] bool contains(const IpAddr& a) const;
  /// True if `a` may be handed out: contains(a), not the gateway and, for IPv4, neither the
  /// network nor the broadcast address (those stay excluded even when rangeStart/rangeEnd name
  /// them explicitly; the reference would hand them out).
  [[nodiscard]] bool allocatable(const IpAddr& a) const;
  /// "192.0.2.0/24 (192.0.2.1-192.0.2.254)".
  [[nodiscard]] std::string str() const;
};

/// The ranges one address is taken from (all of one family, none overlapping).
using RangeSet = std::vector<Range>;

/// The ranges of a set joined with ", ".
[[nodiscard]] std::string range_set_str(const RangeSet& set);
/// Index of the range of `set` that contains `a`, if any.
[[nodiscard]] std::optional<size_t> range_for(const RangeSet& set, const IpAddr& a);

/// host-local's "ipam" object, validated.
struct HostLocalConfig {
  std::vector<RangeSet> ranges;          // legacy top-level subnet first, then "ranges"
  std::vector<cni::RouteEntry> routes;   // "routes", returned as-is
  std::string data_dir = "/var/lib/cni/networks";  // "dataDir"
  std::string resolv_conf;               // "resolvConf" path, "" if none
};

/// Parses one range object ({subnet, rangeStart, rangeEnd, gateway}). `where` names it in
/// errors ("ipam.ranges[0][1]"). Errors (kInvalidConfig, naming the field and value): subnet
/// missing, not a CIDR, host bits set, smaller than /30 (/126 for IPv6); rangeStart/rangeEnd/
/// gateway not an address, of the other family or outside the subnet; rangeStart after rangeEnd.
[[nodiscard]] Result<Range> parse_range(const json::Value& v, const std::string& where);
/// Parses a range set (a non-empty array of ranges of one family, none overlapping).
[[nodiscard]] Result<RangeSet> parse_range_set(const json::Value& v, const std::string& where);
/// Rejects range sets that overlap each other (kInvalidConfig naming both indexes).
[[nodiscard]] Status check_range_sets_disjoint(const std::vector<RangeSet>& sets, std::string_view where);
/// Parses and validates host-local's whole "ipam" object (keys: ranges, subnet, rangeStart,
/// rangeEnd, gateway, routes, dataDir, resolvConf). Errors: kInvalidConfig naming the field.
[[nodiscard]] Result<HostLocalConfig> parse_host_local_config(const json::Value& ipam);

/// The reference allocator's round-robin order over one range set: starts right after
/// `last_reserved` (the content of last_reserved_ip.<N>) when that lies in the set, else at the
/// first range's start; walks each range start..end, moves on to the next range (wrapping), and
/// stops after one full turn. Addresses that are not allocatable() are skipped.
class RangeIter {
 public:
  RangeIter(const RangeSet& set, const std::optional<IpAddr>& last_reserved);
  /// The next candidate and the index of its range in the set; nullopt when the turn is done.
  [[nodiscard]] std::optional<std::pair<IpAddr, size_t>> next();

 private:
  const RangeSet& set_;
  size_t idx_ = 0;
  std::optional<IpAddr> cur_;
  std::optional<IpAddr> first_;
};

/// Reads a resolv.conf into DNS settings as the reference does: "nameserver" (first value),
/// "domain", "search" and "options" (all values); comments ('#', ';') and other lines ignored.
/// Errors: kIo naming the path.
[[nodiscard]] Result<cni::Dns> parse_resolv_conf(const std::string& path);

namespace detail {

/// Parses "routes" ([{dst, gw, mtu, advmss, priority, table, scope}]) of `obj`; `where` is the
/// object's name in errors ("ipam"). Absent means none. Errors: kInvalidConfig naming
/// "<where>.routes[i].<field>".
[[nodiscard]] Result<std::vector<cni::RouteEntry>> parse_routes(const json::Value& obj, std::string_view where);
/// Value of CNI_ARGS key `key` (exact, case-sensitive as the reference's LoadArgs) in `req`.
[[nodiscard]] std::optional<std::string> cni_arg(const Request& req, std::string_view key);
/// Splits "a, b,c" at ',' and trims blanks; empty items dropped.
[[nodiscard]] std::vector<std::string> split_list(std::string_view s);

/// One requested address as given: where it came from ("CNI_ARGS IP") and its text (bare or CIDR).
struct RequestedIpText {
  std::string source;
  std::string text;
};
/// Addresses a request asks for, in the reference's order: an IPAMClaim's status.ips (spec 8),
/// CNI_ARGS IP= (comma separated), args.cni.ips, runtimeConfig.ips. Errors: kInvalidConfig when
/// args.cni or an ips key has the wrong type.
[[nodiscard]] Result<std::vector<RequestedIpText>> requested_ip_texts(const Request& req);
/// Rejects network names that could leave the data directory: empty, ".", "..", containing '/'
/// or NUL, longer than 255 bytes. Errors: kInvalidConfig naming the name.
[[nodiscard]] Status validate_network_name(const std::string& name);

/// Builds host-local from its "ipam" object (see parse_host_local_config).
[[nodiscard]] Result<std::unique_ptr<Ipam>> make_host_local(const json::Value& ipam);
/// Builds static from its "ipam" object: addresses [{address (CIDR), gateway}], routes, dns.
[[nodiscard]] Result<std::unique_ptr<Ipam>> make_static(const json::Value& ipam);

}  // namespace detail
}  // namespace plumb::ipam
