#include "engine/kernel/netconf.hpp"

#include <linux/netconf.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>

#include "engine/kernel/sysctl.hpp"

namespace plumb::netconf {

Result<bool> forwarding_all(netlink::Socket& nl, int family) {
  const std::string what =
      std::string("read ") + (family == AF_INET6 ? "net.ipv6.conf.all.forwarding" : "net.ipv4.ip_forward");
  netlink::Message m(RTM_GETNETCONF, 0);
  auto* h = m.put_header<netconfmsg>();
  h->ncm_family = static_cast<uint8_t>(family);
  m.put_u32(NETCONFA_IFINDEX, static_cast<uint32_t>(NETCONFA_IFINDEX_ALL));
  std::optional<bool> on;
  PLUMB_TRY(nl.query(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWNETCONF) return {};
    auto tb =
        PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(netconfmsg), NETCONFA_MAX, {{NETCONFA_FORWARDING, MNL_TYPE_U32}}));
    if (tb[NETCONFA_FORWARDING] != nullptr) on = mnl_attr_get_u32(tb[NETCONFA_FORWARDING]) != 0;
    return {};
  }));
  if (!on) {
    return std::unexpected(
        Error{cni_code::kKernel, EPROTO, what + ": the kernel's reply has no NETCONFA_FORWARDING", {}});
  }
  return *on;
}

Status ensure_forwarding(netlink::Socket& nl, int family, Watch* watch) {
  if (watch != nullptr) {
    watch->refresh();
    if (watch->forwarding_on(family)) return {};
  }
  if (PLUMB_TRY(forwarding_all(nl, family))) {
    if (watch != nullptr) watch->note_forwarding_on(family);
    return {};
  }
  return sysctl::write(family == AF_INET6 ? "net/ipv6/conf/all/forwarding" : "net/ipv4/ip_forward", "1");
}

}  // namespace plumb::netconf
