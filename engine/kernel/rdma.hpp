// RDMA netlink (NETLINK_RDMA, the RDMA_NL_NLDEV client): the RDMA subsystem's network-namespace
// mode and moving an RDMA device (the VF's `infiniband/<dev>` in sysfs) between namespaces, as
// `rdma system show`, `rdma system set netns exclusive` and `rdma dev set <dev> netns <ns>` do.
//
// There is no family header: the message type is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV = 5, op) =
// (5 << 10) + op, followed directly by attributes:
//
//   RDMA_NLDEV_CMD_GET (1)      [DUMP]                      reply: DEV_INDEX(1) u32, DEV_NAME(2) string
//   RDMA_NLDEV_CMD_SET (2)      DEV_INDEX(1) u32 | NET_NS_FD(68) u32     move a device to a netns
//   RDMA_NLDEV_CMD_SYS_GET (6)                              reply: SYS_ATTR_NETNS_MODE(66) u8
//   RDMA_NLDEV_CMD_SYS_SET (7)  SYS_ATTR_NETNS_MODE(66) u8 (0 exclusive, 1 shared)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"

namespace plumb::rdma {

/// The RDMA subsystem's network-namespace mode (RDMA_NLDEV_SYS_ATTR_NETNS_MODE).
enum class NetnsMode : uint8_t { Exclusive = 0, Shared = 1 };

/// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
[[nodiscard]] uint16_t nldev_type(uint8_t op);

/// RDMA_NLDEV_CMD_GET dump of every RDMA device (flags REQUEST|DUMP).
[[nodiscard]] netlink::Message build_dev_dump();
/// RDMA_NLDEV_CMD_SET moving device `dev_index` into the namespace open at `netns_fd`.
[[nodiscard]] netlink::Message build_set_netns(uint32_t dev_index, int netns_fd);
/// RDMA_NLDEV_CMD_SYS_GET (flags REQUEST).
[[nodiscard]] netlink::Message build_sys_get();
/// RDMA_NLDEV_CMD_SYS_SET of the netns mode. plumb never switches the mode itself (it affects
/// every namespace of the node); this is the message an operator's `rdma system set netns
/// exclusive` sends, checked byte for byte in the tests.
[[nodiscard]] netlink::Message build_sys_set(NetnsMode mode);

/// RDMA operations rdmaIsolation needs. Implementations: NetlinkOps (the plumb binary) and fakes
/// in the tests.
class Ops {
 public:
  virtual ~Ops() = default;
  /// The subsystem's netns mode. Errors: kKernelFeature when the kernel has no RDMA netlink.
  [[nodiscard]] virtual Result<NetnsMode> netns_mode() = 0;
  /// Moves RDMA device `dev`, visible in the namespace open at `from_netns_fd`, into the one at
  /// `to_netns_fd`. Errors: kNotFound when `dev` is not visible there; kKernelFeature when the
  /// kernel has no RDMA netlink; the kernel's errno otherwise.
  [[nodiscard]] virtual Status move(const std::string& dev, int from_netns_fd, int to_netns_fd) = 0;
};

/// Ops over NETLINK_RDMA sockets: the calling thread's shared one of its current namespace for the
/// mode (netlink::shared), one opened in the source namespace for a move.
class NetlinkOps final : public Ops {
 public:
  Result<NetnsMode> netns_mode() override;
  Status move(const std::string& dev, int from_netns_fd, int to_netns_fd) override;
};

/// Opens a NETLINK_RDMA socket in the namespace open at `netns_fd` (-1: the current one). Errors:
/// kKernelFeature naming the missing RDMA netlink when socket() answers EPROTONOSUPPORT (no
/// ib_core), the errno otherwise.
[[nodiscard]] Result<netlink::Socket> open_socket(int netns_fd = -1);

/// Fails with a clear kKernelFeature error naming `who` (what needs it: "rdmaIsolation", "the rdma
/// plugin") unless the mode is exclusive; the mode query's errors prefixed with `who`.
[[nodiscard]] Status ensure_exclusive(Ops& ops, std::string_view who);

}  // namespace plumb::rdma
