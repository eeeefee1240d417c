#include "engine/nft/conntrack.hpp"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "engine/nft/nfnl.hpp"

namespace plumb::nft::conntrack {
namespace {

using netlink::AttrPolicy;

constexpr const char* kNoCtnetlink =
    "conntrack: the kernel has no conntrack netlink (CONFIG_NF_CT_NETLINK / nf_conntrack_netlink): "
    "UDP flows of host ports cannot be flushed";

/// The node's NETLINK_NETFILTER socket (shared with nftables).
Result<nfnl::Session> open_session() {
  auto s = nfnl::Session::open();
  if (!s && s.error().cni_code == cni_code::kKernelFeature) {
    return std::unexpected(Error{cni_code::kKernelFeature, s.error().sys_errno, kNoCtnetlink, {}});
  }
  if (!s) return std::unexpected(s.error().within("conntrack"));
  return s;
}

netlink::Message ct_message(uint16_t msg, uint16_t flags, int family) {
  netlink::Message m(static_cast<uint16_t>((NFNL_SUBSYS_CTNETLINK << 8) | msg), flags);
  auto* nfg = m.put_header<nfgenmsg>();
  nfg->nfgen_family = static_cast<uint8_t>(family);
  nfg->version = NFNETLINK_V0;
  nfg->res_id = 0;
  return m;
}

// ---- policy-validated parsing --------------------------------------------------------------

// The attributes we read, per nest; anything else is skipped.
const std::vector<AttrPolicy> kTopPolicy = {
    {CTA_TUPLE_ORIG, MNL_TYPE_NESTED}, {CTA_TUPLE_REPLY, MNL_TYPE_NESTED},
    {CTA_ID, MNL_TYPE_U32},            {CTA_ZONE, MNL_TYPE_U16},
};
const std::vector<AttrPolicy> kTuplePolicy = {
    {CTA_TUPLE_IP, MNL_TYPE_NESTED},
    {CTA_TUPLE_PROTO, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kIpPolicy = {
    {CTA_IP_V4_SRC, MNL_TYPE_U32},         {CTA_IP_V4_DST, MNL_TYPE_U32},
    {CTA_IP_V6_SRC, MNL_TYPE_BINARY, 16},  {CTA_IP_V6_DST, MNL_TYPE_BINARY, 16},
};
const std::vector<AttrPolicy> kProtoPolicy = {
    {CTA_PROTO_NUM, MNL_TYPE_U8},
    {CTA_PROTO_SRC_PORT, MNL_TYPE_U16},
    {CTA_PROTO_DST_PORT, MNL_TYPE_U16},
};

bool parse_tuple(const nlattr* nest, int family, Tuple& t) {
  auto tuple = netlink::parse_nested(nest, CTA_TUPLE_MAX, kTuplePolicy);
  if (!tuple || (*tuple)[CTA_TUPLE_IP] == nullptr || (*tuple)[CTA_TUPLE_PROTO] == nullptr) return false;
  auto ip = netlink::parse_nested((*tuple)[CTA_TUPLE_IP], CTA_IP_MAX, kIpPolicy);
  if (!ip) return false;
  const bool v4 = family == AF_INET;
  const nlattr* src = (*ip)[v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC];
  const nlattr* dst = (*ip)[v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST];
  if (src == nullptr || dst == nullptr) return false;
  auto s = netlink::read_addr(src, family);
  auto d = netlink::read_addr(dst, family);
  if (!s || !d) return false;
  t.src = *s;
  t.dst = *d;
  auto proto = netlink::parse_nested((*tuple)[CTA_TUPLE_PROTO], CTA_PROTO_MAX, kProtoPolicy);
  if (!proto || (*proto)[CTA_PROTO_NUM] == nullptr) return false;
  const auto& p = *proto;
  t.l4proto = mnl_attr_get_u8(p[CTA_PROTO_NUM]);
  t.sport = p[CTA_PROTO_SRC_PORT] ? ntohs(mnl_attr_get_u16(p[CTA_PROTO_SRC_PORT])) : 0;
  t.dport = p[CTA_PROTO_DST_PORT] ? ntohs(mnl_attr_get_u16(p[CTA_PROTO_DST_PORT])) : 0;
  return true;
}

/// One IPCTNL_MSG_CT_NEW of the dump; nullopt for other messages and for entries that do not
/// parse (skipped: the rest of the dump is still used).
std::optional<Entry> parse_entry(const nlmsghdr* nlh, int family) {
  if (NFNL_MSG_TYPE(nlh->nlmsg_type) != IPCTNL_MSG_CT_NEW) return std::nullopt;
  auto top = netlink::parse_attrs(nlh, sizeof(nfgenmsg), CTA_MAX, kTopPolicy);
  if (!top) return std::nullopt;
  const auto* nfg = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
  const auto& tb = *top;
  Entry e;
  if (nfg->nfgen_family != family || tb[CTA_TUPLE_ORIG] == nullptr || tb[CTA_TUPLE_REPLY] == nullptr ||
      !parse_tuple(tb[CTA_TUPLE_ORIG], family, e.orig) || !parse_tuple(tb[CTA_TUPLE_REPLY], family, e.reply)) {
    return std::nullopt;
  }
  if (tb[CTA_ID]) e.id = ntohl(mnl_attr_get_u32(tb[CTA_ID]));
  if (tb[CTA_ZONE]) e.zone = ntohs(mnl_attr_get_u16(tb[CTA_ZONE]));
  return e;
}

/// The entries of `family` for which `keep` is true.
Result<std::vector<Entry>> dump(netlink::Socket& nl, int family, const std::function<bool(const Entry&)>& keep) {
  const std::string what = std::string("conntrack: dump the ") + (family == AF_INET ? "IPv4" : "IPv6") + " table";
  netlink::Message m = ct_message(IPCTNL_MSG_CT_GET, NLM_F_DUMP, family);
  std::vector<Entry> entries;
  auto st = nl.dump(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (auto e = parse_entry(nlh, family); e && keep(*e)) entries.push_back(std::move(*e));
    return {};
  });
  if (!st) {
    const int err = st.error().sys_errno;
    // nfnetlink answers a request for a subsystem that is not registered with EINVAL (or
    // EOPNOTSUPP): the dump request itself is well formed.
    if (err == EINVAL || err == EOPNOTSUPP) return std::unexpected(Error{cni_code::kKernelFeature, err, kNoCtnetlink, {}});
    return std::unexpected(st.error());
  }
  return entries;
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
  nfnl::Session s = PLUMB_TRY(open_session());
  return dump(s.socket(), family, [](const Entry&) { return true; });
}

//   nlmsghdr {type (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE, REQUEST|ACK}
//   nfgenmsg {family, NFNETLINK_V0, res_id 0}
//   CTA_TUPLE_ORIG (nested)
//   +-- CTA_TUPLE_IP (nested):    CTA_IP_V4_SRC|V6_SRC, CTA_IP_V4_DST|V6_DST (network order)
//   +-- CTA_TUPLE_PROTO (nested): CTA_PROTO_NUM u8, CTA_PROTO_SRC_PORT be16, CTA_PROTO_DST_PORT be16
//   [CTA_ZONE be16] [CTA_ID be32]
netlink::Message build_delete(int family, const Entry& e) {
  netlink::Message m = ct_message(IPCTNL_MSG_CT_DELETE, NLM_F_ACK, family);
  const bool v4 = family == AF_INET;
  {
    netlink::Message::Nest orig(m, CTA_TUPLE_ORIG);
    {
      netlink::Message::Nest ip(m, CTA_TUPLE_IP);
      m.put(v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, e.orig.src.bytes.data(), e.orig.src.size());
      m.put(v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST, e.orig.dst.bytes.data(), e.orig.dst.size());
    }
    netlink::Message::Nest proto(m, CTA_TUPLE_PROTO);
    m.put_u8(CTA_PROTO_NUM, e.orig.l4proto);
    m.put_u16(CTA_PROTO_SRC_PORT, htons(e.orig.sport));
    m.put_u16(CTA_PROTO_DST_PORT, htons(e.orig.dport));
  }
  if (e.zone) m.put_u16(CTA_ZONE, htons(*e.zone));
  if (e.id) m.put_u32(CTA_ID, htonl(*e.id));
  return m;
}

size_t build_delete(char* buf, uint32_t seq, int family, const Entry& e) {
  netlink::Message m = build_delete(family, e);
  m.header()->nlmsg_seq = seq;
  std::memcpy(buf, m.data(), m.size());
  return m.size();
}

Result<size_t> remove_matching(const std::vector<Filter>& filters) {
  if (filters.empty()) return size_t{0};
  nfnl::Session s = PLUMB_TRY(open_session());
  size_t deleted = 0;
  for (int family : {AF_INET, AF_INET6}) {
    if (std::none_of(filters.begin(), filters.end(), [&](const Filter& f) { return f.family == family; })) continue;
    auto matching = PLUMB_TRY(dump(s.socket(), family, [&](const Entry& e) {
      return std::any_of(filters.begin(), filters.end(), [&](const Filter& f) { return matches(f, e); });
    }));
    for (const Entry& e : matching) {
      netlink::Message m = build_delete(family, e);
      auto st = s.socket().request(m, "conntrack: delete entry " + entry_text(e));
      if (st) {
        ++deleted;
      } else if (st.error().sys_errno != ENOENT) {  // ENOENT: timed out or deleted meanwhile
        return std::unexpected(st.error());
      }
    }
  }
  return deleted;
}

}  // namespace plumb::nft::conntrack
