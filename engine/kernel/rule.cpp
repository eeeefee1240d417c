#include "engine/kernel/rule.hpp"

#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>

namespace plumb::rule {
namespace {

using netlink::AttrPolicy;
using netlink::Message;

const std::vector<AttrPolicy> kRulePolicy = {
    {FRA_SRC, MNL_TYPE_BINARY, 4},
    {FRA_TABLE, MNL_TYPE_U32},
    {FRA_PRIORITY, MNL_TYPE_U32},
};

std::string describe(const Rule& r) {
  std::string s = "from " + (r.src.len == 0 ? std::string("all") : r.src.network().str()) + " lookup " + std::to_string(r.table);
  if (r.priority != 0) s += " pref " + std::to_string(r.priority);
  return s;
}

Status check_rule(const Rule& r, const std::string& what) {
  int fam = r.src.addr.family;
  if ((fam != AF_INET && fam != AF_INET6) || r.src.len > r.src.max_len() || r.table == 0) {
    return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, what + ": invalid rule", {}});
  }
  return {};
}

// fib_rule_hdr { family, dst_len 0, src_len, tos 0, table (<256, else RT_TABLE_UNSPEC), res1,
// res2, action, flags 0 } | [FRA_SRC network] | FRA_TABLE u32 | [FRA_PRIORITY u32]
Message build(uint16_t type, uint16_t flags, const Rule& r) {
  Message m(type, flags);
  auto* h = m.put_header<fib_rule_hdr>();
  h->family = static_cast<uint8_t>(r.src.addr.family);
  h->src_len = r.src.len;
  h->table = static_cast<uint8_t>(r.table < 256 ? r.table : RT_TABLE_UNSPEC);
  h->action = r.action;
  if (r.src.len > 0) {
    IpPrefix net = r.src.network();
    m.put(FRA_SRC, net.addr.bytes.data(), net.addr.size());
  }
  m.put_u32(FRA_TABLE, r.table);
  if (r.priority != 0) m.put_u32(FRA_PRIORITY, r.priority);
  return m;
}

}  // namespace

Message build_add(const Rule& r) { return build(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, r); }

Status add(netlink::Socket& nl, const Rule& r) {
  const std::string what = "add rule " + describe(r);
  PLUMB_TRY(check_rule(r, what));
  Message m = build_add(r);
  return netlink::classify_create(nl.request(m, what));
}

Result<bool> remove(netlink::Socket& nl, const Rule& r) {
  const std::string what = "delete rule " + describe(r);
  PLUMB_TRY(check_rule(r, what));
  Message m = build(RTM_DELRULE, 0, r);
  auto st = nl.request(m, what);
  if (st) return true;
  if (st.error().sys_errno == ENOENT) return false;
  return std::unexpected(st.error());
}

Result<std::vector<Rule>> list(netlink::Socket& nl, int family) {
  if (family != AF_INET && family != AF_INET6) {
    return std::unexpected(Error{cni_code::kInternal, EAFNOSUPPORT, "list rules: family is not IPv4/IPv6", {}});
  }
  Message m(RTM_GETRULE, NLM_F_DUMP);
  auto* h = m.put_header<fib_rule_hdr>();
  h->family = static_cast<uint8_t>(family);
  std::vector<Rule> out;
  PLUMB_TRY(nl.dump(m, "dump rules", [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWRULE) return {};
    const auto* hdr = static_cast<const fib_rule_hdr*>(mnl_nlmsg_get_payload(nlh));
    if (hdr->family != family) return {};
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(fib_rule_hdr), FRA_MAX, kRulePolicy));
    Rule r;
    r.src.addr.family = family;
    r.src.len = hdr->src_len;
    if (tb[FRA_SRC]) r.src.addr = PLUMB_TRY(netlink::read_addr(tb[FRA_SRC], family));
    r.table = tb[FRA_TABLE] ? mnl_attr_get_u32(tb[FRA_TABLE]) : hdr->table;
    r.priority = tb[FRA_PRIORITY] ? mnl_attr_get_u32(tb[FRA_PRIORITY]) : 0;
    r.action = hdr->action;
    out.push_back(r);
    return {};
  }));
  return out;
}

}  // namespace plumb::rule
