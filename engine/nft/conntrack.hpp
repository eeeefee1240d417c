// Conntrack entries over ctnetlink (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_CTNETLINK), in the
// calling thread's network namespace: list them and delete selected ones. Used to flush the UDP
// flows of a released (or newly claimed) host port, which would otherwise keep following their
// old NAT binding until they time out. Messages go through the node's shared NETLINK_NETFILTER
// socket (netlink::shared, the one nftables uses); every delete is acked.
//
//   IPCTNL_MSG_CT_DELETE request (one per entry):
//   nlmsghdr | nfgenmsg {family, NFNETLINK_V0, 0}
//   CTA_TUPLE_ORIG { CTA_TUPLE_IP { CTA_IP_V4_SRC|V6_SRC, CTA_IP_V4_DST|V6_DST },
//                    CTA_TUPLE_PROTO { CTA_PROTO_NUM u8, CTA_PROTO_SRC_PORT be16, CTA_PROTO_DST_PORT be16 } }
//   [CTA_ZONE be16]  [CTA_ID be32]      (the entry's id: a recreated entry is not deleted)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"
#include "engine/netlink/message.hpp"

namespace plumb::nft::conntrack {

/// One direction of a connection.
struct Tuple {
  IpAddr src, dst;
  uint8_t l4proto = 0;
  uint16_t sport = 0, dport = 0;  ///< host order; 0 for protocols without ports
};

/// One conntrack entry as dumped.
struct Entry {
  Tuple orig;            ///< as the first packet was seen
  Tuple reply;           ///< the expected answer: its source is the DNAT target
  std::optional<uint32_t> id;    ///< CTA_ID (host order)
  std::optional<uint16_t> zone;  ///< CTA_ZONE (host order)
};

/// Selects entries to delete. Every set field must match.
struct Filter {
  int family = 0;                  ///< AF_INET or AF_INET6
  uint8_t l4proto = 0;
  uint16_t orig_dport = 0;         ///< the host port
  std::vector<IpAddr> orig_dst;    ///< original destination is one of these; empty: any
  std::optional<IpAddr> reply_src; ///< the connection was sent to this address (DNAT target)
  std::optional<uint16_t> reply_sport;
};

/// True when `e` matches `f`.
[[nodiscard]] bool matches(const Filter& f, const Entry& e);

/// Dumps the conntrack table of `family`. Errors: kKernelFeature when the kernel has no
/// conntrack netlink (CONFIG_NF_CT_NETLINK); kKernel with errno otherwise.
[[nodiscard]] Result<std::vector<Entry>> list(int family);

/// The IPCTNL_MSG_CT_DELETE request for `e` (flags REQUEST|ACK; seq and port id are set when sent).
[[nodiscard]] netlink::Message build_delete(int family, const Entry& e);
/// The same request numbered `seq`, copied into `buf` (for golden tests); returns its length.
/// buf must hold at least 256 bytes.
size_t build_delete(char* buf, uint32_t seq, int family, const Entry& e);

/// Deletes every entry matching one of `filters`; returns how many the kernel deleted (entries
/// that vanished meanwhile, ENOENT, are not counted and not errors).
/// Errors: as list(); kKernel naming the entry when the kernel refuses a delete.
[[nodiscard]] Result<size_t> remove_matching(const std::vector<Filter>& filters);

}  // namespace plumb::nft::conntrack
