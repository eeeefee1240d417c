#include "engine/nft/nfnl.hpp"

#include "engine/nft/portmap_objects.hpp"

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include <cerrno>

namespace plumb::nft::nfnl {
namespace {

/// Room reserved for one libnftnl-built message outside a batch.
constexpr size_t kSingleMessageRoom = size_t{64} * 1024;

/// The first comment (NFTNL_UDATA_RULE_COMMENT) of a rule's user data, "" if none.
std::string rule_comment(nftnl_rule* rule) {
  std::string comment;
  uint32_t len = 0;
  const void* ud = nftnl_rule_is_set(rule, NFTNL_RULE_USERDATA) ? nftnl_rule_get_data(rule, NFTNL_RULE_USERDATA, &len)
                                                                : nullptr;
  if (ud == nullptr) return comment;
  auto cb = [](const nftnl_udata* attr, void* out) -> int {
    if (nftnl_udata_type(attr) != NFTNL_UDATA_RULE_COMMENT) return 0;
    const char* text = static_cast<const char*>(nftnl_udata_get(attr));
    uint8_t n = nftnl_udata_len(attr);
    while (n > 0 && text[n - 1] == '\0') --n;
    static_cast<std::string*>(out)->assign(text, n);
    return 0;
  };
  nftnl_udata_parse(ud, len, cb, &comment);
  return comment;
}

}  // namespace

// ---- Batch ---------------------------------------------------------------------------------

Batch::Batch(uint32_t first_seq, size_t limit, uint16_t family)
    : messages_(NFNL_SUBSYS_NFTABLES, first_seq, limit), family_(family) {}

size_t Batch::add(uint16_t type, uint16_t flags, std::string what, std::string feature,
                  const std::function<void(nlmsghdr*)>& payload) {
  what_.push_back(std::move(what));
  feature_.push_back(std::move(feature));
  return messages_.add_raw([&](char* buf, uint32_t seq) {
    payload(nftnl_nlmsg_build_hdr(buf, type, family_, flags, seq));
  });
}

size_t Batch::add_table(uint16_t type, uint16_t flags, const nftnl_table* t, std::string what, std::string feature) {
  return add(type, flags, std::move(what), std::move(feature),
             [&](nlmsghdr* nlh) { nftnl_table_nlmsg_build_payload(nlh, t); });
}

size_t Batch::add_chain(uint16_t type, uint16_t flags, const nftnl_chain* c, std::string what, std::string feature) {
  return add(type, flags, std::move(what), std::move(feature),
             [&](nlmsghdr* nlh) { nftnl_chain_nlmsg_build_payload(nlh, c); });
}

size_t Batch::add_rule(uint16_t type, uint16_t flags, nftnl_rule* r, std::string what, std::string feature) {
  return add(type, flags, std::move(what), std::move(feature),
             [&](nlmsghdr* nlh) { nftnl_rule_nlmsg_build_payload(nlh, r); });
}

size_t Batch::add_set(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature) {
  return add(type, flags, std::move(what), std::move(feature),
             [&](nlmsghdr* nlh) { nftnl_set_nlmsg_build_payload(nlh, s); });
}

size_t Batch::add_elems(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature) {
  return add(type, flags, std::move(what), std::move(feature),
             [&](nlmsghdr* nlh) { nftnl_set_elems_nlmsg_build_payload(nlh, s); });
}

Status Batch::finish() {
  auto st = messages_.finish();
  if (!st) return std::unexpected(st.error().within("nftables"));
  return {};
}

// ---- Outcome -------------------------------------------------------------------------------

Error to_error(const Batch& b, const Outcome& out) {
  for (size_t i = 0; i < out.acks.size(); ++i) {
    const Ack& a = out.acks[i];
    if (!a.seen || a.err == 0) continue;
    // A missing chain type or expression is ENOENT once module autoloading failed. EOPNOTSUPP
    // here is a conflict (e.g. a foreign regular chain where a base chain goes), not a feature.
    if (!b.feature(i).empty() && a.err == ENOENT) {
      return Error{cni_code::kKernelFeature, a.err, "nftables: " + b.what(i) + ": " + b.feature(i), a.ext};
    }
    return Error{cni_code::kKernel, a.err, "nftables: " + b.what(i), a.ext};
  }
  if (out.batch_err == EOPNOTSUPP) {
    return Error{cni_code::kKernelFeature, out.batch_err,
                 "nftables: the kernel has no nf_tables support (CONFIG_NF_TABLES)", out.batch_ext};
  }
  if (out.batch_err != 0) {
    return Error{cni_code::kKernel, out.batch_err, "nftables: commit transaction of " + b.what(0), out.batch_ext};
  }
  return Error{cni_code::kInternal, 0, "nftables: no ack for " + b.what(0) + " and following", {}};
}

bool only_errno(const Outcome& out, int err) {
  if (out.batch_err != 0) return false;
  for (const auto& a : out.acks) {
    if (a.seen && a.err != 0 && a.err != err) return false;
  }
  return true;
}

netlink::Message request(uint16_t type, uint16_t family, uint16_t flags, const std::function<void(nlmsghdr*)>& payload) {
  netlink::Message m(0, 0);
  char* buf = reinterpret_cast<char*>(m.raw(kSingleMessageRoom));
  netlink::write_over_zeroes(buf, kSingleMessageRoom, [&](char* b) { payload(nftnl_nlmsg_build_hdr(b, type, family, flags, 0)); });
  return m;
}

// ---- Session -------------------------------------------------------------------------------

Result<Session> Session::open() {
  auto s = netlink::shared(NETLINK_NETFILTER);
  if (!s) {
    const int err = s.error().sys_errno;
    if (err == EPROTONOSUPPORT || err == EAFNOSUPPORT) {
      return std::unexpected(Error{cni_code::kKernelFeature, err,
                                   "nftables: the kernel has no nfnetlink (CONFIG_NETFILTER_NETLINK)", {}});
    }
    return std::unexpected(s.error().within("nftables"));
  }
  return Session(std::move(*s));
}

std::unique_ptr<Batch> Session::batch(uint16_t family) {
  constexpr size_t kLimit = netlink::Batch::kDefaultLimit;
  // BEGIN, at most max_messages(limit) messages, END: numbers no other request will use.
  return std::make_unique<Batch>(socket_->reserve_seq(netlink::Batch::max_messages(kLimit) + 2), kLimit, family);
}

Result<Outcome> Session::send(const Batch& b) {
  const std::string what = "nftables: " + (b.count() > 0 ? b.what(0) : std::string("empty batch"));
  return socket_->send_batch(b.messages(), what);
}

Result<std::optional<std::string>> Session::first_rule_comment(const std::string& table, const std::string& chain) {
  const std::string what = "nftables: list chain inet " + table + " " + chain;
  nftnl_rule* filter = nftnl_rule_alloc();
  if (filter == nullptr) return fail_errno(ENOMEM, what);
  nftnl_rule_set_str(filter, NFTNL_RULE_TABLE, table.c_str());
  nftnl_rule_set_str(filter, NFTNL_RULE_CHAIN, chain.c_str());
  netlink::Message m = request(NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP,
                               [&](nlmsghdr* nlh) { nftnl_rule_nlmsg_build_payload(nlh, filter); });
  nftnl_rule_free(filter);

  std::optional<std::string> first;
  auto st = socket_->dump(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (first || NFNL_MSG_TYPE(nlh->nlmsg_type) != NFT_MSG_NEWRULE) return {};
    nftnl_rule* rule = nftnl_rule_alloc();
    if (rule == nullptr) return fail_errno(ENOMEM, what);
    if (nftnl_rule_nlmsg_parse(nlh, rule) == 0) first = rule_comment(rule);
    nftnl_rule_free(rule);
    return {};
  });
  if (!st) {
    if (st.error().sys_errno == ENOENT) return std::optional<std::string>{};
    return std::unexpected(st.error());
  }
  return std::optional<std::string>(first.value_or(""));
}

Result<bool> Session::has_chain(uint16_t family, const std::string& table, const std::string& chain) {
  const std::string what = "nftables: get chain " + table + " " + chain;
  obj::Chain c(nftnl_chain_alloc());
  if (!c) return fail_errno(ENOMEM, what);
  nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TABLE, table.c_str());
  nftnl_chain_set_str(c.get(), NFTNL_CHAIN_NAME, chain.c_str());
  netlink::Message m = request(NFT_MSG_GETCHAIN, family, 0, [&](nlmsghdr* nlh) { nftnl_chain_nlmsg_build_payload(nlh, c.get()); });
  auto st = socket().query(m, what, [](const nlmsghdr*) -> Status { return {}; });
  if (st) return true;
  if (st.error().sys_errno == ENOENT) return false;
  return std::unexpected(st.error());
}

Result<bool> Session::has_set(uint16_t family, const std::string& table, const std::string& set) {
  const std::string what = "nftables: get set " + table + " " + set;
  obj::Set s(nftnl_set_alloc());
  if (!s) return fail_errno(ENOMEM, what);
  nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table.c_str());
  nftnl_set_set_str(s.get(), NFTNL_SET_NAME, set.c_str());
  netlink::Message m = request(NFT_MSG_GETSET, family, 0, [&](nlmsghdr* nlh) { nftnl_set_nlmsg_build_payload(nlh, s.get()); });
  auto st = socket().query(m, what, [](const nlmsghdr*) -> Status { return {}; });
  if (st) return true;
  if (st.error().sys_errno == ENOENT) return false;
  return std::unexpected(st.error());
}

Result<std::optional<Element>> Session::get_element(const std::string& table, const std::string& set,
                                                    const std::vector<uint8_t>& key) {
  const std::string what = "nftables: get element of inet " + table + " " + set;
  obj::Set ref = pmobj::set_ref(table, set);
  pmobj::add_element(ref.get(), key);
  netlink::Message m = request(NFT_MSG_GETSETELEM, obj::kFamily, 0,
                               [&](nlmsghdr* nlh) { nftnl_set_elems_nlmsg_build_payload(nlh, ref.get()); });
  std::optional<Element> found;
  auto st = socket().query(m, what, [&](const nlmsghdr* h) -> Status {
    if (found || NFNL_MSG_TYPE(h->nlmsg_type) != NFT_MSG_NEWSETELEM) return {};
    obj::Set parsed(nftnl_set_alloc());
    if (!parsed || nftnl_set_elems_nlmsg_parse(h, parsed.get()) < 0) {
      return fail_errno(EBADMSG, what + ": unreadable NFT_MSG_NEWSETELEM reply");
    }
    nftnl_set_elem_foreach(parsed.get(), [](nftnl_set_elem* e, void* d) -> int {
      auto* out = static_cast<std::optional<Element>*>(d);
      if (*out) return 0;
      Element el;
      uint32_t len = 0;
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)) {
        const auto* p = static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len));
        if (p != nullptr) el.data.assign(p, p + len);
      }
      el.comment = pmobj::element_comment(e);
      *out = std::move(el);
      return 0;
    }, &found);
    return {};
  });
  if (!st) {
    if (st.error().sys_errno == ENOENT) return std::optional<Element>{};
    return std::unexpected(st.error());
  }
  return found;
}

}  // namespace plumb::nft::nfnl
