#include "engine/nft/conntrack.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

namespace plumb::nft::conntrack {
namespace {

constexpr size_t kRecvBuf = 64 * 1024;
constexpr const char* kNoCtnetlink =
    "conntrack: the kernel has no conntrack netlink (CONFIG_NF_CT_NETLINK / nf_conntrack_netlink): "
    "UDP flows of host ports cannot be flushed";

struct SocketClose {
  void operator()(mnl_socket* nl) const { mnl_socket_close(nl); }
};
using SocketPtr = std::unique_ptr<mnl_socket, SocketClose>;

Result<SocketPtr> open_socket() {
  SocketPtr nl(mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC));
  if (!nl) {
    const int err = errno;
    if (err == EPROTONOSUPPORT || err == EAFNOSUPPORT) return std::unexpected(Error{cni_code::kKernelFeature, err, kNoCtnetlink, {}});
    return fail_errno(err, "conntrack: open NETLINK_NETFILTER socket");
  }
  if (mnl_socket_bind(nl.get(), 0, MNL_SOCKET_AUTOPID) < 0) return fail_errno(errno, "conntrack: bind netlink socket");
  return nl;
}

nlmsghdr* put_header(char* buf, uint16_t msg, uint16_t flags, uint32_t seq, int family) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_CTNETLINK << 8) | msg);
  nlh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
  nlh->nlmsg_seq = seq;
  auto* nfg = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(nfgenmsg)));
  nfg->nfgen_family = static_cast<uint8_t>(family);
  nfg->version = NFNETLINK_V0;
  nfg->res_id = 0;
  return nlh;
}

// ---- policy-validated parsing --------------------------------------------------------------

template <size_t N>
struct Attrs {
  std::array<const nlattr*, N + 1> tb{};
};

// Types of the attributes we read, per nest; anything else is skipped.
int validate_top(const nlattr* a) {
  switch (mnl_attr_get_type(a)) {
    case CTA_TUPLE_ORIG:
    case CTA_TUPLE_REPLY: return mnl_attr_validate(a, MNL_TYPE_NESTED);
    case CTA_ID: return mnl_attr_validate(a, MNL_TYPE_U32);
    case CTA_ZONE: return mnl_attr_validate(a, MNL_TYPE_U16);
    default: return 0;
  }
}
int validate_tuple(const nlattr* a) {
  switch (mnl_attr_get_type(a)) {
    case CTA_TUPLE_IP:
    case CTA_TUPLE_PROTO: return mnl_attr_validate(a, MNL_TYPE_NESTED);
    default: return 0;
  }
}
int validate_ip(const nlattr* a) {
  switch (mnl_attr_get_type(a)) {
    case CTA_IP_V4_SRC:
    case CTA_IP_V4_DST: return mnl_attr_validate(a, MNL_TYPE_U32);
    case CTA_IP_V6_SRC:
    case CTA_IP_V6_DST: return mnl_attr_validate2(a, MNL_TYPE_BINARY, 16);
    default: return 0;
  }
}
int validate_proto(const nlattr* a) {
  switch (mnl_attr_get_type(a)) {
    case CTA_PROTO_NUM: return mnl_attr_validate(a, MNL_TYPE_U8);
    case CTA_PROTO_SRC_PORT:
    case CTA_PROTO_DST_PORT: return mnl_attr_validate(a, MNL_TYPE_U16);
    default: return 0;
  }
}

template <size_t N, int (*Validate)(const nlattr*)>
int collect_cb(const nlattr* a, void* data) {
  const uint16_t type = mnl_attr_get_type(a);
  if (type > N) return MNL_CB_OK;
  if (Validate(a) < 0) return MNL_CB_ERROR;
  static_cast<Attrs<N>*>(data)->tb[type] = a;
  return MNL_CB_OK;
}

bool parse_addr(const nlattr* a, int family, IpAddr& out) {
  if (a == nullptr) return false;
  out = IpAddr{};
  out.family = family;
  const size_t len = family == AF_INET ? 4 : 16;
  if (mnl_attr_get_payload_len(a) != len) return false;
  std::memcpy(out.bytes.data(), mnl_attr_get_payload(a), len);
  return true;
}

bool parse_tuple(const nlattr* nest, int family, Tuple& t) {
  Attrs<CTA_TUPLE_MAX> tuple;
  if (mnl_attr_parse_nested(nest, collect_cb<CTA_TUPLE_MAX, validate_tuple>, &tuple) < 0) return false;
  if (tuple.tb[CTA_TUPLE_IP] == nullptr || tuple.tb[CTA_TUPLE_PROTO] == nullptr) return false;
  Attrs<CTA_IP_MAX> ip;
  if (mnl_attr_parse_nested(tuple.tb[CTA_TUPLE_IP], collect_cb<CTA_IP_MAX, validate_ip>, &ip) < 0) return false;
  const bool v4 = family == AF_INET;
  if (!parse_addr(ip.tb[v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC], family, t.src)) return false;
  if (!parse_addr(ip.tb[v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST], family, t.dst)) return false;
  Attrs<CTA_PROTO_MAX> proto;
  if (mnl_attr_parse_nested(tuple.tb[CTA_TUPLE_PROTO], collect_cb<CTA_PROTO_MAX, validate_proto>, &proto) < 0) {
    return false;
  }
  if (proto.tb[CTA_PROTO_NUM] == nullptr) return false;
  t.l4proto = mnl_attr_get_u8(proto.tb[CTA_PROTO_NUM]);
  t.sport = proto.tb[CTA_PROTO_SRC_PORT] ? ntohs(mnl_attr_get_u16(proto.tb[CTA_PROTO_SRC_PORT])) : 0;
  t.dport = proto.tb[CTA_PROTO_DST_PORT] ? ntohs(mnl_attr_get_u16(proto.tb[CTA_PROTO_DST_PORT])) : 0;
  return true;
}

struct DumpCtx {
  int family;
  std::vector<Entry> entries;
  bool malformed = false;
};

int dump_cb(const nlmsghdr* nlh, void* data) {
  auto* ctx = static_cast<DumpCtx*>(data);
  if ((nlh->nlmsg_type & 0xff) != IPCTNL_MSG_CT_NEW) return MNL_CB_OK;
  const auto* nfg = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
  if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(nfgenmsg)) || nfg->nfgen_family != ctx->family) return MNL_CB_OK;
  Attrs<CTA_MAX> top;
  Entry e;
  if (mnl_attr_parse(nlh, sizeof(nfgenmsg), collect_cb<CTA_MAX, validate_top>, &top) < 0 ||
      top.tb[CTA_TUPLE_ORIG] == nullptr || top.tb[CTA_TUPLE_REPLY] == nullptr ||
      !parse_tuple(top.tb[CTA_TUPLE_ORIG], ctx->family, e.orig) ||
      !parse_tuple(top.tb[CTA_TUPLE_REPLY], ctx->family, e.reply)) {
    ctx->malformed = true;  // skip this entry, keep the rest of the dump
    return MNL_CB_OK;
  }
  if (top.tb[CTA_ID]) e.id = ntohl(mnl_attr_get_u32(top.tb[CTA_ID]));
  if (top.tb[CTA_ZONE]) e.zone = ntohs(mnl_attr_get_u16(top.tb[CTA_ZONE]));
  ctx->entries.push_back(std::move(e));
  return MNL_CB_OK;
}

Result<std::vector<Entry>> dump(mnl_socket* nl, int family, uint32_t& seq) {
  std::vector<char> buf(kRecvBuf);
  const std::string what = std::string("conntrack: dump the ") + (family == AF_INET ? "IPv4" : "IPv6") + " table";
  nlmsghdr* nlh = put_header(buf.data(), IPCTNL_MSG_CT_GET, NLM_F_DUMP, ++seq, family);
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) return fail_errno(errno, what);
  DumpCtx ctx{family, {}};
  const uint32_t portid = mnl_socket_get_portid(nl);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno(errno, what + " (receive)");
    }
    int r = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq, portid, dump_cb, &ctx);
    if (r == MNL_CB_STOP) break;
    if (r < 0) {
      const int err = errno;
      // nfnetlink answers a request for a subsystem that is not registered with EINVAL (or
      // EOPNOTSUPP): the dump request itself is well formed.
      if (err == EINVAL || err == EOPNOTSUPP) return std::unexpected(Error{cni_code::kKernelFeature, err, kNoCtnetlink, {}});
      return fail_errno(err, what);
    }
  }
  return std::move(ctx.entries);
}

void put_addr(nlmsghdr* nlh, uint16_t type, const IpAddr& a) {
  mnl_attr_put(nlh, type, a.size(), a.bytes.data());
}

std::string entry_text(const Entry& e) {
  return std::to_string(e.orig.l4proto) + " " + e.orig.src.str() + ":" + std::to_string(e.orig.sport) + " -> " +
         e.orig.dst.str() + ":" + std::to_string(e.orig.dport);
}

}  // namespace

bool matches(const Filter& f, const Entry& e) {
  if (e.orig.src.family != f.family || e.orig.l4proto != f.l4proto || e.orig.dport != f.orig_dport) return false;
  if (!f.orig_dst.empty() && std::find(f.orig_dst.begin(), f.orig_dst.end(), e.orig.dst) == f.orig_dst.end()) return false;
  if (f.reply_src && e.reply.src != *f.reply_src) return false;
  if (f.reply_sport && e.reply.sport != *f.reply_sport) return false;
  return true;
}

Result<std::vector<Entry>> list(int family) {
  if (family != AF_INET && family != AF_INET6) return fail(cni_code::kInvalidConfig, "conntrack: family must be IPv4 or IPv6");
  SocketPtr nl = PLUMB_TRY(open_socket());
  uint32_t seq = static_cast<uint32_t>(time(nullptr));
  return dump(nl.get(), family, seq);
}

size_t build_delete(char* buf, uint32_t seq, int family, const Entry& e) {
  nlmsghdr* nlh = put_header(buf, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, seq, family);
  const bool v4 = family == AF_INET;
  nlattr* orig = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
  nlattr* ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
  put_addr(nlh, v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, e.orig.src);
  put_addr(nlh, v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST, e.orig.dst);
  mnl_attr_nest_end(nlh, ip);
  nlattr* proto = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
  mnl_attr_put_u8(nlh, CTA_PROTO_NUM, e.orig.l4proto);
  mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(e.orig.sport));
  mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(e.orig.dport));
  mnl_attr_nest_end(nlh, proto);
  mnl_attr_nest_end(nlh, orig);
  if (e.zone) mnl_attr_put_u16(nlh, CTA_ZONE, htons(*e.zone));
  if (e.id) mnl_attr_put_u32(nlh, CTA_ID, htonl(*e.id));
  return nlh->nlmsg_len;
}

Result<size_t> remove_matching(const std::vector<Filter>& filters) {
  if (filters.empty()) return size_t{0};
  SocketPtr nl = PLUMB_TRY(open_socket());
  uint32_t seq = static_cast<uint32_t>(time(nullptr));
  const uint32_t portid = mnl_socket_get_portid(nl.get());
  size_t deleted = 0;
  for (int family : {AF_INET, AF_INET6}) {
    if (std::none_of(filters.begin(), filters.end(), [&](const Filter& f) { return f.family == family; })) continue;
    auto entries = PLUMB_TRY(dump(nl.get(), family, seq));
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
    for (const Entry& e : entries) {
      if (std::none_of(filters.begin(), filters.end(), [&](const Filter& f) { return matches(f, e); })) continue;
      const uint32_t s = ++seq;
      const size_t len = build_delete(buf.data(), s, family, e);
      const std::string what = "conntrack: delete entry " + entry_text(e);
      if (mnl_socket_sendto(nl.get(), buf.data(), len) < 0) return fail_errno(errno, what);
      for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl.get(), buf.data(), buf.size());
        if (n < 0) {
          if (errno == EINTR) continue;
          return fail_errno(errno, what + " (receive ack)");
        }
        int r = mnl_cb_run(buf.data(), static_cast<size_t>(n), s, portid, nullptr, nullptr);
        if (r == MNL_CB_STOP) {
          ++deleted;
          break;
        }
        if (r < 0) {
          if (errno == ENOENT) break;  // timed out or deleted meanwhile
          return fail_errno(errno, what);
        }
      }
    }
  }
  return deleted;
}

}  // namespace plumb::nft::conntrack
