#include "engine/kernel/rdma.hpp"

#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <optional>

namespace plumb::rdma {
namespace {

const std::vector<netlink::AttrPolicy> kDevPolicy = {
    {RDMA_NLDEV_ATTR_DEV_INDEX, MNL_TYPE_U32, 0},
    {RDMA_NLDEV_ATTR_DEV_NAME, MNL_TYPE_NUL_STRING, 0},
};
const std::vector<netlink::AttrPolicy> kSysPolicy = {
    {RDMA_NLDEV_SYS_ATTR_NETNS_MODE, MNL_TYPE_U8, 0},
};

/// The index of RDMA device `dev` as the namespace of `nl` sees it; nullopt when not visible.
Result<std::optional<uint32_t>> index_of(netlink::Socket& nl, const std::string& dev) {
  netlink::Message m = build_dev_dump();
  std::optional<uint32_t> found;
  PLUMB_TRY(nl.dump(m, "list RDMA devices", [&](const nlmsghdr* nlh) -> Status {
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, 0, RDMA_NLDEV_ATTR_MAX, kDevPolicy));
    if (tb[RDMA_NLDEV_ATTR_DEV_INDEX] != nullptr && tb[RDMA_NLDEV_ATTR_DEV_NAME] != nullptr &&
        dev == mnl_attr_get_str(tb[RDMA_NLDEV_ATTR_DEV_NAME])) {
      found = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
    }
    return {};
  }));
  return found;
}

/// Socket errors, with EPROTONOSUPPORT (no ib_core) as the missing feature it is.
Error open_error(const Error& e) {
  if (e.sys_errno != EPROTONOSUPPORT) return e;
  return Error{cni_code::kKernelFeature, 0,
               "this kernel has no RDMA netlink (socket(AF_NETLINK, NETLINK_RDMA) answers EPROTONOSUPPORT): "
               "rdmaIsolation needs the ib_core module",
               e.text()};
}

}  // namespace

uint16_t nldev_type(uint8_t op) { return static_cast<uint16_t>(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)); }

netlink::Message build_dev_dump() { return netlink::Message(nldev_type(RDMA_NLDEV_CMD_GET), NLM_F_DUMP); }

netlink::Message build_set_netns(uint32_t dev_index, int netns_fd) {
  netlink::Message m(nldev_type(RDMA_NLDEV_CMD_SET), 0);
  m.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  m.put_u32(RDMA_NLDEV_NET_NS_FD, static_cast<uint32_t>(netns_fd));
  return m;
}

netlink::Message build_sys_get() { return netlink::Message(nldev_type(RDMA_NLDEV_CMD_SYS_GET), 0); }

netlink::Message build_sys_set(NetnsMode mode) {
  netlink::Message m(nldev_type(RDMA_NLDEV_CMD_SYS_SET), 0);
  m.put_u8(RDMA_NLDEV_SYS_ATTR_NETNS_MODE, static_cast<uint8_t>(mode));
  return m;
}

Result<netlink::Socket> open_socket(int netns_fd) {
  auto s = netns_fd < 0 ? netlink::Socket::open(NETLINK_RDMA) : netlink::Socket::open_in(netns_fd, NETLINK_RDMA);
  if (!s) return std::unexpected(open_error(s.error()));
  return s;
}

Result<NetnsMode> NetlinkOps::netns_mode() {
  auto nl = netlink::shared(NETLINK_RDMA);  // the node's: the mode is one per node
  if (!nl) return std::unexpected(open_error(nl.error()));
  netlink::Message m = build_sys_get();
  std::optional<uint8_t> mode;
  PLUMB_TRY((*nl)->query(m, "read the RDMA subsystem's netns mode", [&](const nlmsghdr* nlh) -> Status {
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, 0, RDMA_NLDEV_ATTR_MAX, kSysPolicy));
    if (tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE] != nullptr) mode = mnl_attr_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
    return {};
  }));
  if (!mode) return fail(cni_code::kKernelFeature, "the kernel's RDMA netlink does not report a netns mode (kernel < 5.3)");
  return *mode == 0 ? NetnsMode::Exclusive : NetnsMode::Shared;
}

Status NetlinkOps::move(const std::string& dev, int from_netns_fd, int to_netns_fd) {
  auto nl = PLUMB_TRY(open_socket(from_netns_fd));
  auto index = PLUMB_TRY(index_of(nl, dev));
  if (!index) return fail(cni_code::kNotFound, "RDMA device " + dev + " is not visible in the source namespace");
  netlink::Message m = build_set_netns(*index, to_netns_fd);
  return nl.request(m, "move RDMA device " + dev + " to another network namespace");
}

Status ensure_exclusive(Ops& ops, std::string_view who) {
  auto mode = ops.netns_mode();
  if (!mode) return std::unexpected(mode.error().within(std::string(who)));
  if (*mode != NetnsMode::Exclusive) {
    return fail(cni_code::kKernelFeature,
                std::string(who) + " needs the RDMA subsystem in exclusive netns mode, but it is shared "
                "(switch it with `rdma system set netns exclusive` while no pod uses RDMA)");
  }
  return {};
}

}  // namespace plumb::rdma
