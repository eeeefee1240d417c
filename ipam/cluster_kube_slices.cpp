// Node slices of the Kubernetes datastore (whereabouts' NodeSlicePool, cluster_kube.hpp): which
// slice of the range is this node's, taken by the node itself when it has none.
#include <algorithm>

#include "engine/base/text.hpp"
#include "ipam/cluster_internal.hpp"
#include "ipam/cluster_kube_internal.hpp"

namespace plumb::ipam::cluster {
namespace {

using internal::from_u128;
using internal::to_u128;

constexpr int kMaxSliceWrites = 16;  // slice assignments lost to other nodes before giving up

}  // namespace

kube::Site kube::slice_site(const Pool& pool, const IpPrefix& slice, const std::string& network_name,
                            const std::string& node) {
  Site s{pool, slice, wb::pool_name(network_name, node, slice), pool.subnet.len};
  // whereabouts hands out the slice's first to last usable address (not its network or last
  // address, in either family); the configured range_start/range_end/exclude/gateway still hold.
  const int family = slice.addr.family;
  const IpAddr first = from_u128(family, to_u128(slice.addr) + 1);
  const IpAddr last = from_u128(family, to_u128(slice.last()) - 1);
  s.pool.start = std::max(pool.start, first);
  s.pool.end = std::min(pool.end, last);
  return s;
}

Result<std::optional<IpPrefix>> KubeClusterIpam::Impl::node_slice(const std::string& name, bool assign) {
  const Config& cfg = ipam.cfg_;
  const Pool& pool = cfg.pools[0];
  const std::string what = cfg.type + ": NodeSlicePool " + ipam.ns_ + "/" + name;
  if (name.empty()) return fail(cni_code::kInvalidConfig, cfg.type + ": node_slice_size needs network_name or a network name");
  const auto slices = PLUMB_TRY(wb::divide(pool.subnet, *cfg.node_slice_len));
  const std::string path = wb::slice_pools_path(ipam.ns_, name);
  const size_t start = text::fnv1a64(ipam.node_) % slices.size();  // nodes try different slices first
  for (int attempt = 0; attempt < kMaxSliceWrites; ++attempt) {
    auto got = PLUMB_TRY(ipam.client_->get(path, "read " + what));
    if (!got) {
      if (!assign) return std::optional<IpPrefix>{};
      std::string body = wb::encode_slice_pool(ipam.ns_, name, pool.subnet, cfg.node_slice_size, slices, start, ipam.node_);
      auto w = PLUMB_TRY(send("POST", wb::slice_pools_path(ipam.ns_), body, k8s::kJson, "create " + what));
      if (w == Write::Won) return std::optional<IpPrefix>(slices[start]);
      continue;  // created by another node meanwhile
    }
    auto nsp = PLUMB_TRY(wb::decode_slice_pool(*got, what));
    auto len = wb::parse_slice_size(nsp.slice_size, pool.subnet);
    if (nsp.range != wb::cidr_text(pool.subnet) || !len || *len != *cfg.node_slice_len) {
      return fail(cni_code::kInvalidConfig, what + " divides " + nsp.range + " into " + nsp.slice_size + " slices, but ipam says range " +
                                                wb::cidr_text(pool.subnet) + " and node_slice_size " + cfg.node_slice_size);
    }
    for (const auto& [node, range] : nsp.allocations) {
      if (node != ipam.node_) continue;
      auto p = IpPrefix::parse(range);
      if (!p || p->len != *len || !pool.subnet.contains(p->addr)) {
        return fail(cni_code::kDecode, what + " gives node " + node + " slice \"" + range + "\", not a /" +
                                           std::to_string(*len) + " of " + nsp.range);
      }
      return std::optional<IpPrefix>(p->network());
    }
    if (!assign) return std::optional<IpPrefix>{};
    std::vector<size_t> free;
    if (!nsp.has_status) {
      free.push_back(start);
    } else {
      for (size_t k = 0; k < nsp.allocations.size(); ++k) {
        size_t i = (start + k) % nsp.allocations.size();
        if (nsp.allocations[i].first.empty()) free.push_back(i);
      }
    }
    if (free.empty()) {
      return fail(cni_code::kIpamExhausted, what + ": every slice is assigned to a node; none left for node " + ipam.node_);
    }
    const size_t idx = free.front();
    auto w = PLUMB_TRY(send("PATCH", path, wb::take_slice_patch(nsp, slices, idx, ipam.node_), k8s::kJsonPatch,
                            "take a slice of " + what));
    if (w == Write::Won) {
      auto p = nsp.has_status ? IpPrefix::parse(nsp.allocations[idx].second) : Result<IpPrefix>(slices[idx]);
      if (!p) return fail(cni_code::kDecode, what + " slice \"" + nsp.allocations[idx].second + "\" is not a CIDR");
      return std::optional<IpPrefix>(p->network());
    }
    ++ipam.stats_.conflicts;
  }
  return fail(cni_code::kTryAgainLater, what + ": no slice could be taken in " + std::to_string(kMaxSliceWrites) +
                                            " attempts: other nodes kept changing the pool");
}

}  // namespace plumb::ipam::cluster
