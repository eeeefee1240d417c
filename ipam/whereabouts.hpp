// whereabouts' Kubernetes objects (whereabouts.cni.cncf.io/v1alpha1), exactly as whereabouts
// writes them, so pools are shared both ways: pure encoding, decoding and naming, no I/O.
//
//   IPPool        metadata.name  "<range>" or "<network_name>-<range>" (node slices:
//                                "<node>-<slice>" / "<network_name>-<node>-<slice>"), the range as
//                                Go prints the CIDR with ':' and '/' replaced by '-'
//                                ("10.0.0.0-24", "2001-db8---64")
//                 spec.range     the CIDR ("10.0.0.0/24"; the node's slice for slice pools)
//                 spec.allocations {"<offset>": {"id": <containerID>, "podref": "<ns>/<pod>",
//                                "ifname": <ifname, omitted when empty>}}: the offset of the address
//                                from spec.range's address, in decimal
//   OverlappingRangeIPReservation  metadata.name  the address with ':' -> '-' (a trailing ':'
//                                gets a '0'), "<network_name>-" in front when named;
//                                spec {containerid (omitted by whereabouts), podref, ifname}
//   NodeSlicePool metadata.name  network_name, else the CNI network's name; spec {range,
//                                sliceSize "/28" or "28"}; status.allocations [{nodeName,
//                                sliceRange}], nodeName "" = free
// (whereabouts: pkg/api/whereabouts.cni.cncf.io/v1alpha1/*_types.go, pkg/storage/kubernetes/ipam.go,
// pkg/node-controller/controller.go.)
//
// Writes are JSON patches (RFC 6902) whose "test" operations are the compare-and-swap: an
// allocation is added only where the slot tests null (absent), removed only while its "id"
// still tests equal to the owner's. A failed test is the API server's 422 "Invalid".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::ipam::whereabouts {

/// Addresses as 128-bit integers (offsets).
using u128 = unsigned __int128;

inline constexpr std::string_view kApiVersion = "whereabouts.cni.cncf.io/v1alpha1";
inline constexpr std::string_view kApiBase = "/apis/whereabouts.cni.cncf.io/v1alpha1";

/// The CIDR as Go's net.IPNet.String() prints it ("10.0.0.0/24", "2001:db8::/64").
[[nodiscard]] std::string cidr_text(const IpPrefix& range);
/// whereabouts' normalizeRange: cidr_text with ':' and '/' replaced by '-'.
[[nodiscard]] std::string normalize_range(const IpPrefix& range);
/// IPPool name: ["<network_name>-"]["<node>-"]<normalize_range(range)> (node: slice pools only).
[[nodiscard]] std::string pool_name(const std::string& network_name, const std::string& node, const IpPrefix& range);
/// OverlappingRangeIPReservation name of `ip` (whereabouts' NormalizeIP).
[[nodiscard]] std::string reservation_name(const IpAddr& ip, const std::string& network_name);

/// API paths in namespace `ns`: the collection, and one object when `name` is given.
[[nodiscard]] std::string pools_path(const std::string& ns, const std::string& name = {});
[[nodiscard]] std::string reservations_path(const std::string& ns, const std::string& name = {});
[[nodiscard]] std::string slice_pools_path(const std::string& ns, const std::string& name = {});

/// One entry of spec.allocations.
struct Allocation {
  std::string id;      // container ID (or plumb's "ipamclaim:<ns>/<name>" owner)
  std::string podref;  // "<namespace>/<pod>" ("" for plumb's IPAMClaim owners)
  std::string ifname;  // "" in allocations of old whereabouts versions
  bool operator==(const Allocation&) const = default;
};

/// An IPPool as read.
struct IpPool {
  std::string name;
  std::string resource_version;
  std::string range_text;               // spec.range as written
  IpPrefix range;                       // spec.range parsed; range.addr (host bits kept) is offset 0
  std::map<u128, Allocation> allocations;  // by offset; keys that are not decimal numbers are skipped
  /// The address at `offset` from range.addr.
  [[nodiscard]] IpAddr at(u128 offset) const;
  /// The offset of `ip` from range.addr (ip must not be below it).
  [[nodiscard]] u128 offset_of(const IpAddr& ip) const;
};

/// Decodes an IPPool object. Errors: kDecode naming `what` and the field (no spec.range, a bad
/// CIDR, an allocation that is not an object).
[[nodiscard]] Result<IpPool> decode_pool(const json::Value& obj, const std::string& what);
/// Decodes an IPPool from the API server's answer `text` (parsed in place: a pool of thousands
/// of allocations is read on every ADD). Errors: kDecode naming `what` (not JSON, or as
/// decode_pool).
[[nodiscard]] Result<IpPool> parse_pool(std::string text, const std::string& what);
/// A new IPPool object (for POST) in `ns` with `allocations` (offset -> allocation).
[[nodiscard]] std::string encode_pool(const std::string& ns, const std::string& name, const IpPrefix& range,
                                      const std::map<u128, Allocation>& allocations);

/// The JSON patch that adds `a` at `offset` only where the slot is empty.
[[nodiscard]] std::string claim_patch(u128 offset, const Allocation& a);
/// The JSON patch that removes the allocation at each (offset, id) only while it still has that id.
[[nodiscard]] std::string release_patch(const std::vector<std::pair<u128, std::string>>& slots);

/// An OverlappingRangeIPReservation as read.
struct Reservation {
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string container_id;  // spec.containerid ("" when whereabouts wrote it)
  std::string podref;
  std::string ifname;
};
/// Decodes an OverlappingRangeIPReservation. Errors: kDecode naming `what`.
[[nodiscard]] Result<Reservation> decode_reservation(const json::Value& obj, const std::string& what);
/// A new OverlappingRangeIPReservation object (for POST).
[[nodiscard]] std::string encode_reservation(const std::string& ns, const std::string& name, const Allocation& a);
/// A DeleteOptions body whose preconditions are `uid` and `resource_version`.
[[nodiscard]] std::string delete_preconditions(const std::string& uid, const std::string& resource_version);

/// A NodeSlicePool as read.
struct NodeSlicePool {
  std::string name;
  std::string resource_version;
  std::string range;       // spec.range
  std::string slice_size;  // spec.sliceSize as written
  bool has_status = false;  // status.allocations present
  std::vector<std::pair<std::string, std::string>> allocations;  // (nodeName, sliceRange) in order
};
/// Decodes a NodeSlicePool. Errors: kDecode naming `what`.
[[nodiscard]] Result<NodeSlicePool> decode_slice_pool(const json::Value& obj, const std::string& what);
/// A new NodeSlicePool (for POST): every slice of `range`, `node` holding slice `taken`.
[[nodiscard]] std::string encode_slice_pool(const std::string& ns, const std::string& name, const IpPrefix& range,
                                            const std::string& slice_size, const std::vector<IpPrefix>& slices,
                                            size_t taken, const std::string& node);
/// The JSON patch that gives slice `index` to `node` only while the object is at
/// `resource_version` and the slice is free (or, without status, adds status with every slice).
[[nodiscard]] std::string take_slice_patch(const NodeSlicePool& pool, const std::vector<IpPrefix>& slices,
                                           size_t index, const std::string& node);
/// The JSON patch that frees the slices at `indexes` while their nodeName still tests equal.
[[nodiscard]] std::string free_slices_patch(const NodeSlicePool& pool, const std::vector<size_t>& indexes);

/// node_slice_size ("/28" or "28") as a prefix length. Errors: kInvalidConfig naming the value.
[[nodiscard]] Result<unsigned> parse_slice_size(const std::string& text, const IpPrefix& range);
/// whereabouts' DivideRangeBySize: every /slice_len subnet of `range`, in address order.
/// Errors: kInvalidConfig when there would be more than 65536 slices.
[[nodiscard]] Result<std::vector<IpPrefix>> divide(const IpPrefix& range, unsigned slice_len);

}  // namespace plumb::ipam::whereabouts
